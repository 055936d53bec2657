"""Salvage: the tool calls of an answer read wherever the model put them, whatever format it was asked for.

Models asked for one format often answer in another or wrap the calls in noise: a pythonic list with prose before
or after it, several lists on separate lines, bare calls one per line or joined by ``;``, code fences (with or
without a language tag, indented, ``return [...]`` inside code), JSON-ish call objects (single quotes,
``parameters``), their own native dialect (``<tool_call>`` blocks, any registered format's tags), calls quoted as
strings (``['f(a=1)']``), markdown-escaped names (``calculate\\_area``). :func:`salvage` reads all of these. It is a
reader, not a format: nothing is rendered here, and the wire formats stay the only place a format is parsed (tagged
regions go to the format's own lenient parser; pythonic calls to :mod:`refiner.formats.pythonic`; JSON to the shared
decoder and :mod:`refiner.formats.jsonfix`).

Grammar (the text after any reasoning block; ``ws`` is spaces and tabs)::

    answer   := (noise | site)*
    site     := tagged | named | object | keyed | pair | call | quoted
    tagged   := MARKER ...             a registered format's first marker to the end of the text, read by that
                                       format's parse_lenient (the site ends after the format's last closer when
                                       one follows its last marker); formats sharing a marker are told apart by
                                       their sniff hooks, as detection does; with no marker anywhere, the first
                                       format (by rank) whose closer occurs reads the whole text
    named    := NAME [TOKEN] object    a tool name right before its arguments, as a sentinel format's call reads once
                                       its tokens are lost (NAME{...}, Kimi-K2's id functions.NAME:0{...}), or with
                                       a registered format's token between them (NAME[ARGS]{...}); or NAME alone on
                                       the line before a code fence holding the object (DeepSeek V3's layout, its
                                       type word "function" glued before the name); counts when structured and
                                       offered (any name without tools)
    object   := "{" ... "}"            a JSON object, or a Python dict literal (single quotes, True/None), or one
                                       repaired by json_repair, that either a bare registered format claims
                                       (claims_value: an OpenAI message with tool_calls, ...) or that holds a tool
                                       name (name / tool_name / api_name / function.name / ...) and its arguments
                                       (arguments / parameters / input / args, an object or JSON text); items of a
                                       JSON list are objects of their own
    keyed    := "{" NAME ":" object "}" BFCL's answer shape (and Apertus's calls): each key an offered tool's name,
                                       its value the arguments (one call per key); with tools only
    pair     := ( "(" | "[" ) QUOTE NAME QUOTE "," object ( ")" | "]" )
                                       a name and its arguments as a tuple or a JSON pair; NAME offered, tools only
    call     := NAME ws "(" args ")"   NAME a dotted identifier (a markdown escape \\_ reads as _; a namespace prefix
                                       such as functions. or default_api. is dropped when the rest names an offered
                                       tool); args keyword literals (true/false/null too), and positional literals
                                       mapped onto the offered tool's parameters in their declared order
    quoted   := QUOTE call QUOTE       a string literal holding exactly one call
    by names := markup no format knows (an XML-ish element, a labelled line, a YAML-ish block) holding an offered
                tool's name as a whole field and its declared parameter names: read by
                :mod:`refiner.formats.markup`, only when no other site gave a call, and marked as found so

When a call counts (no call is ever made up from prose that does not hold one):

- A call is *structured* when it sits in a code fence, or its line up to it holds only list brackets, quotes,
  bullets, numbering, tags, ``return`` / ``await`` / ``>>>`` / an assignment, or ends with ``:``, or it follows
  another structured call with only separators (``,`` ``;`` ``+`` brackets, quotes, spaces) between: lists joined by
  ``+`` (``[a(x=1)] + [b(y=2)]``) are read whole. Tagged regions and
  call objects are structured. Any other call is *loose* (inside a sentence).
- A structured call counts. A loose call counts only when the request offers tools, its name is an offered one
  (same name up to case and separators), it has at least one argument and every argument is a literal; and loose
  calls count only when the answer holds no structured call at all.
- With tools offered, a name that is not offered counts in a list (``[...]``), a tagged region or a call object, not
  in a bare code line (``print(x)``, ``json.dumps(...)``).
- A call whose argument is a placeholder (``get_weather(city)``, ``f(x=...)``) is a signature, not a call.
  Positional values that no declared parameter takes (no tools, too many, a parameter given twice) are dropped
  from a call in a list (as the formats' lenient readers drop them) and make any other call unreadable
  (``print("x")`` in code). An expression value (``math.pi``) in a structured call is kept as its text.
- A call object whose arguments are written beside its name (``{"name": "f", "city": "Paris"}``) counts for an
  offered tool, or without tools when it starts its line; a quoted tool description (``"description"`` beside the
  name, or a JSON schema as the arguments) is not a call.
- Sites inside another site are part of it (a dict inside a call's arguments is a value). A call written again in
  another site (a restatement: the same name and arguments in another list, block or sentence) counts once; inside
  one list, repeated calls are kept.
- Markdown-escaped parameter names (``detail\\_level``) are read as the names the offered tool declares.
- A call cut off by the end of the text is left out, as tier 1 leaves out the call a text stops inside (never
  presented as complete, never an invented value).

Cost: linear scans (``str.find``, anchored or linear regexes, the JSON decoder) over at most
:data:`~refiner.formats.base.MAX_LENIENT_CHARS` characters, the regions of at most :data:`MAX_TAGGED_FORMATS`
formats read leniently, at most :data:`MAX_CANDIDATES` candidate sites, :data:`SCAN_BUDGET` characters and
:data:`MARK_BUDGET` brackets and commas of bracket matching and :data:`AST_BUDGET` characters given to Python's parser;
json repairs share one :func:`~refiner.formats.jsonfix.repair_budget`. Each marker is searched once per text (a
request's reading hands detection's search on), and with :func:`~refiner.formats.base.same_texts` once per request.
Never raises: an unexpected error gives what was read so far and a note.
"""

from __future__ import annotations

import ast
import bisect
import functools
import keyword
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from refiner.calls import ToolCall, canonical_json
from refiner.formats.base import (
    MAX_LENIENT_CHARS,
    FormatError,
    Lenient,
    Problem,
    WireFormat,
    by_rank,
    marker_positions,
    marker_table,
    prefix,
    remember,
    same_texts,
)
from refiner.formats.jsonfix import budget_spent, lenient_json, repair_budget
from refiner.formats.lenient import ARG_KEYS, NAME_KEYS, coerce_call
from refiner.formats.markup import KIND, calls_by_names
from refiner.formats.pythonic import Literals, matching_paren, parse_expr, parse_quietly, place_positional
from refiner.formats.strict import JSON_DECODER
from refiner.formats.text import dumps, reasoning_offset, skip_ws

MAX_CANDIDATES = 256  # candidate sites examined (call names followed by "(", "{" positions)
MAX_SITES = 64  # sites read
MAX_CALLS = 128  # calls returned
MAX_CALL_CHARS = 4096  # a call's or object's text, brackets matched within this window
MAX_OBJECT_CHARS = 32_768  # a JSON object decoded strictly at one position
SCAN_BUDGET = 65_536  # characters of bracket matching in all
MARK_BUDGET = 8_192  # brackets and commas passed by bracket matching in all (a bracket storm is all marks)
AST_BUDGET = 32_768  # characters given to Python's parser in all
PREFIX_CHARS = 160  # how much of a call's line before it is looked at
MAX_FENCES = 256
MAX_TAGGED_FORMATS = 4  # formats whose markers occur that read their regions (the first by position; a real answer
# holds one format's markers, a model mixing dialects two or three; each reading of a 200 KB storm costs milliseconds)
MAX_GAP = 64  # separators between two sites of one group


def _next_call_match(text: str, pos: int) -> re.Match | None:
    """``_CALL.search(text, pos)`` for a name of at most MAX_NAME_CHARS: no match starts before the first "(" that
    could end one (a name holds no "("), so each such "(" is tried in turn with the name window before it."""
    for _ in range(MAX_PAREN_MISSES):
        p = _PAREN_AFTER_WORD.search(text, pos)
        if p is None:
            return None
        m = _CALL.search(text, max(pos, p.end() - 1 - MAX_NAME_CHARS), p.end())
        if m is not None:
            return m
        pos = p.end()
    return _CALL.search(text, pos)


class _Reader(WireFormat):
    """Error messages of the pythonic helpers (never registered)."""

    name = "salvage"


_READER = _Reader()
_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_SPELLING = re.compile(r"[\w.\- ]{1,256}")  # what another spelling of a tool name may hold
# A call: a dotted identifier (markdown-escaped underscores allowed) not inside a longer name, then "(".
_CALL = re.compile(r"(?<![\w.\\])([^\W\d](?:\w|\\_)*(?:\.[^\W\d](?:\w|\\_)*)*)[ \t]*\(")
# Where a call may end: a "(" after a name's last character or a blank. _CALL runs only on the few hundred characters
# before each (a pattern that starts with a lookbehind costs ~100 ns at every position of a 200 KB text).
_PAREN_AFTER_WORD = re.compile(r"[\w \t]\(")
MAX_NAME_CHARS = 256  # of a call's name and the blanks after it
MAX_PAREN_MISSES = 256  # "(" looked at where no call ends, before one search of the rest
# What may stand before a structured call on its line: tags, bullets, numbering, code keywords, an assignment,
# brackets and quotes.
_STRUCT_PREFIX = re.compile(
    r"(?:<[^<>\n]{1,40}>|[\s>*+\-•|])*"
    r"(?:\d{1,3}[.)]\s+)?"
    r"(?:(?:return|await|yield|print|>>>|\$)\s*)?"
    r"(?:[^\W\d][\w.]*\s*=\s*)?"
    r"[\s\[('\"`]*"
)
_TRAILER = " \t;,.)]}'\"`*"  # what may follow a call on its line without making it part of a sentence
# words before a call's name, starting a list item: a tool name written with spaces
_SPACED_HEAD = re.compile(r"[\[,][ \t]*((?:[^\W\d]\w*[ \t]+){1,6})\Z")
_GAP = re.compile(r"[\s,;'\"]*")  # between two calls of one group
# between a structured call and the next one ("+" joins two lists: [a(x=1)] + [b(y=2)])
_STRUCT_GAP = re.compile(r"[\s,;'\"\[\]()+]*")
# A call written as a pair: ("NAME", {...}) or ["NAME", {...}] (the name quoted, then a comma, before the object)
_PAIR_HEAD = re.compile(r"[\[(][ \t]*(['\"])([^'\"\n]{1,256})\1[ \t]*,[ \t\n]*\Z")
_PAIR_TAIL = re.compile(r"[ \t\n]*[\])]")
_NAMESPACE = ("functions", "function", "tools", "tool", "default_api", "api")
# A tool name written right before its JSON arguments: an identifier, or Kimi-K2's call id functions.NAME:INDEX.
_NAMED_HEAD = re.compile(r"(?:functions\.)?([^\W\d][\w.\-]*?)(?::\d+)?")
_V3_TYPE = "function"


@functools.lru_cache(maxsize=1)
def _tokens() -> tuple[str, ...]:
    """Every registered format's markers and closers that may stand between a tool name and its arguments."""
    return tuple(m for f in by_rank() for m in (*f.detection.markers, *f.detection.closers) if len(m) > 2)


def normalise(name: str) -> str:
    """A tool name for comparison: lower case, separators dropped (``getWeather`` == ``get_weather``)."""
    return _NON_ALNUM.sub("", name.lower())


@dataclass
class Site:
    """One place calls were read from: ``text[start:end]`` of the answer (offsets in the whole text)."""

    start: int
    end: int
    calls: list[ToolCall]
    kind: str  # "pythonic call", "JSON call object", "<tool_call> block", ...
    fmt: str | None  # the registered format that writes this shape (for output when none was asked for)
    structured: bool
    context: str  # "in a code fence", "in a list", "in prose", ...
    line: int = 0
    group: int = 0
    by_names: bool = False  # found by the offered tool and parameter names in markup no format knows


@dataclass
class Salvage:
    """What :func:`salvage` read: the calls in order, the sites they came from, and notes on what was passed over."""

    calls: list[ToolCall] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    complete: bool = True  # the whole text was read (no bound reached, no structured call left unread)
    # candidates examined, characters scanned, marks passed, characters parsed
    work: dict[str, int] = field(default_factory=dict)

    @property
    def fmt(self) -> str | None:
        """The registered format of the first site that gave calls."""
        return next((s.fmt for s in self.sites if s.calls and s.fmt), None)

    def describe(self, limit: int = 4) -> str:
        """Where the calls were found, for people: ``"2 pythonic calls in a code fence (line 3); ..."``."""
        seen: dict[tuple[str, str], list[int]] = {}
        for s in self.sites:
            if s.calls:
                seen.setdefault((s.kind, s.context), [0, s.line])[0] += len(s.calls)
        parts = [
            f"{n} {kind if n == 1 else _plural(kind)} {context} (line {line})"
            for (kind, context), (n, line) in list(seen.items())[:limit]
        ]
        if len(seen) > limit:
            parts.append(f"{len(seen) - limit} more")
        return "; ".join(parts) if parts else "no call"


def _plural(kind: str) -> str:
    head, sep, tail = kind.partition(" (")
    return f"{head}s{sep}{tail}"


def is_offered(name: str, offered: Mapping[str, Any] | None) -> bool:
    """Whether ``name`` is one of the offered tools, up to case and separators (always False without tools)."""
    return offered is not None and _resolve(name, offered)[1] is not None


def _resolve(name: str, offered: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(name to emit, offered name or None)``: exact, then equal up to case and separators, then without a
    namespace prefix (``functions.get_weather``)."""
    if name in offered:
        return name, name
    if not _SPELLING.fullmatch(name):
        return name, None  # text around a name ("``` [get_weather") is not another spelling of it
    key = normalise(name)
    hits = [n for n in offered if normalise(n) == key]
    if len(hits) == 1:
        return name, hits[0]
    head, dot, rest = name.partition(".")
    if dot and head.lower() in _NAMESPACE:
        inner, hit = _resolve(rest, offered)
        if hit is not None:
            return inner, hit
    return name, None


class _Scan:
    """One salvage pass over one text (state: budgets, fences, sites)."""

    def __init__(
        self,
        text: str,
        body_at: int,
        offered: Mapping[str, Sequence[str]] | None,
        known: Mapping[str, Lenient] | None = None,
        markers: Mapping[str, int] | None = None,
    ) -> None:
        self.text = text
        self.at = body_at
        self.offered = offered
        self.known = known or {}  # the lenient readings of the whole text already made, by format name
        self.markers = markers  # where each registered marker first occurs in the text, when already searched
        self.candidates = 0
        self.scanned = 0
        self.marks = 0  # brackets and commas passed by match_paren
        self.parsed = 0
        self.sites: list[Site] = []
        self.notes: list[str] = []
        self.unreadable = 0  # structured calls that could not be read
        self.name_hits = 0  # occurrences of offered names examined by the markup reader
        self.fences = self._fences()
        self.claimed: list[tuple[int, int]] = []
        self.last: Site | None = None  # the last site the left-to-right scan read
        self._spaced = self._spaced_names()

    # -- shared ---------------------------------------------------------------------------------------------

    def _fences(self) -> list[tuple[int, int]]:
        """``(start, end)`` of each ````` ``` ````` fenced block (an unclosed one runs to the end)."""
        marks, i = [], self.text.find("```", self.at)
        while i >= 0 and len(marks) < 2 * MAX_FENCES:
            marks.append(i)
            i = self.text.find("```", i + 3)
        if len(marks) % 2:
            marks.append(len(self.text))
        return list(zip(marks[::2], marks[1::2]))

    def in_fence(self, pos: int) -> bool:
        k = bisect.bisect_right(self.fences, (pos, len(self.text) + 1)) - 1
        return k >= 0 and self.fences[k][0] <= pos < self.fences[k][1]

    def line_of(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1

    def match_paren(self, open_at: int) -> tuple[int, bool]:
        """``(index of the matching closer, closed)`` for the bracket at ``open_at``, within MAX_CALL_CHARS; when it is
        not closed there, ``(end of the window, False)``."""
        window = self.text[open_at : open_at + MAX_CALL_CHARS]
        j = matching_paren(window, 0, max_marks=MARK_BUDGET - self.marks)
        if j < 0:  # the marks ran out: nothing more is matched
            self.marks = MARK_BUDGET
            return open_at + len(window), False
        self.scanned += min(j + 1, len(window))
        self.marks += sum(window.count(c, 0, j + 1) for c in "()[]{},")
        return open_at + j, j < len(window)

    def budget_left(self) -> bool:
        return (
            self.candidates < MAX_CANDIDATES
            and self.scanned < SCAN_BUDGET
            and self.marks < MARK_BUDGET
            and self.parsed < AST_BUDGET
            and len(self.sites) < MAX_SITES
        )

    # -- tagged regions, by the registry ---------------------------------------------------------------------

    def tagged(self) -> None:
        """A site per registered format whose marker occurs: its first marker to its last closer, read by it."""
        body = self.text
        chosen: dict[str, tuple[WireFormat, int, str]] = {}
        ranked = [f for f in by_rank() if f.detection.markers]  # (an untagged format may have markers too)
        found_at = self.markers if self.markers is not None else remember(
            body, "marker_positions", lambda: marker_positions(body))

        def find(marker: str) -> int:  # where ``marker`` first occurs after the reasoning
            i = found_at.get(marker, -1)
            return body.find(marker, self.at) if 0 <= i < self.at else i

        naming = marker_table().naming["markers"]  # (every registered marker, in rank order, by its formats)
        for marker in naming:
            if marker not in found_at and marker[:1] != "\n":
                continue
            i = find(marker)
            if marker[:1] == "\n":  # a marker at a line start (Functionary's >>>): the text's first line is one
                k = skip_ws(body, self.at)
                if body.startswith(marker[1:], k) and (i < 0 or k < i):
                    i = k
            if i < 0:
                continue
            sharing = naming[marker]
            fmt = next((f for f in sharing if f.sniff(body[self.at :], i - self.at)), sharing[-1])
            if fmt.name not in chosen or i < chosen[fmt.name][1]:
                chosen[fmt.name] = (fmt, i, marker)
        if not chosen and found_at:  # no marker at all: a format whose closer occurs reads the whole text (its
            for fmt in ranked:  # opener was lost)
                found = [c for c in fmt.detection.closers if find(c) >= 0]
                if found:
                    chosen[fmt.name] = (fmt, self.at, found[0])
                    break
        if not chosen and self.offered:  # no tag at all: calls told by the offered tools' names alone
            self.untagged(ranked)
        # the parts a format's grammar marks as the answer (gpt-oss's final channel) hold no call, whatever is written
        regions = sorted(chosen.values(), key=lambda t: t[1])
        if len(regions) > MAX_TAGGED_FORMATS:
            self.notes.append(f"markers of {len(regions)} formats: only the first {MAX_TAGGED_FORMATS} were read")
            self.unreadable += 1
            regions = regions[:MAX_TAGGED_FORMATS]
            chosen = {fmt.name: (fmt, start, marker) for fmt, start, marker in regions}
        answers = {name: fmt.answer_spans(body, self.at) for name, (fmt, _, _) in chosen.items()}
        for fmt, start, marker in regions:
            if any(a <= start < b for a, b in self.claimed):
                continue
            if any(a <= start < b for name, spans in answers.items() if name != fmt.name for a, b in spans):
                continue
            # (a format whose call starts before its marker, GLM's name line above its first <arg_key>, says where)
            start = max([self.at, fmt.region_start(body, start)] + [b for a, b in self.claimed if b <= start])
            # the format reads from its first marker to the end (its closers need not end it: Mistral's [ARGS] is
            # followed by the arguments); the region claimed from the other readers ends after its last closer when
            # one follows its last marker
            end = len(body)
            last_marker = max(body.rfind(m) + len(m) for m in fmt.detection.markers)
            closes = [body.rfind(c) + len(c) for c in fmt.detection.closers]
            if closes and max(closes) > last_marker:
                end = max(closes)
            # (with only whitespace between the reasoning and the marker the whole text reads the same: a reading of
            # it in this format already made is taken)
            whole = start == skip_ws(body, self.at)
            got = self.known.get(fmt.name) if whole else None
            if got is None:
                got = fmt.parse_lenient(body if whole else body[start:], tools=self.offered)
            cut = got.cut.index if got.cut is not None and not got.cut.clean else None  # stopped mid-value: left out
            calls = [self.unescape_params(c) for n, c in enumerate(got.calls) if n != cut and _usable_name(c.name)]
            if calls:
                where = "in a code fence" if self.in_fence(start) else "after prose" if body[self.at : start].strip() \
                    else "at the start"
                self.sites.append(Site(start, end, calls, f"{marker} block ({fmt.name})", fmt.name, True, where,
                                       self.line_of(start)))
            # a call the format read as cut, or whose id it read as naming no tool (Kimi-K2's functions.invalid.0), is
            # no other reader's to take
            if calls or cut is not None or any(p.code == "unnamed_call" for p in got.problems):
                self.claimed.append((start, end))
        self.claimed.extend(span for spans in answers.values() for span in spans)

    def by_names(self) -> None:
        """Calls in markup no format knows, found by the offered tools' names and parameter names
        (:func:`refiner.formats.markup.calls_by_names`): a site each, marked ``by_names`` and noted."""
        found, notes, self.name_hits = calls_by_names(self.text, self.at, self.offered or {}, self.claimed)
        self.notes.extend(notes)
        for f in found:
            where = "after prose" if self.text[self.at : f.start].strip() else "at the start"
            self.add(Site(f.start, f.end, [f.call], f"{KIND} ({f.how})", None, True, where, self.line_of(f.start),
                          by_names=True))
        if found:
            self.notes.append(f"{len(found)} call(s) found only by the offered tool and parameter names, in markup "
                              "no format knows")

    def untagged(self, ranked: Sequence[WireFormat]) -> None:
        """The first format that reads calls in a text holding none of its tags, by the offered tools
        (:meth:`~refiner.formats.base.WireFormat.read_untagged`): one site."""
        for fmt in ranked:
            got = fmt.read_untagged(self.text, self.at, self.offered)
            if got is not None:
                start, end, calls = got
                where = "after prose" if self.text[self.at : start].strip() else "at the start"
                self.sites.append(Site(start, end, calls, f"untagged call ({fmt.name})", fmt.name, True, where,
                                       self.line_of(start)))
                self.claimed.append((start, end))
                return

    # -- the scan for calls and call objects ------------------------------------------------------------------

    def scan(self) -> None:
        text, pos = self.text, self.at
        call_m: re.Match | None = None
        calls_left, obj_at = True, -2  # -1: no "{" after pos; each search runs again only once passed
        while pos < len(text) and self.budget_left():
            if calls_left and (call_m is None or call_m.start() < pos):
                call_m = self._next_call(pos)
                calls_left = call_m is not None
            if obj_at == -2 or 0 <= obj_at < pos:
                obj_at = text.find("{", pos)
            starts = [s for s in (call_m.start() if calls_left else -1, obj_at) if s >= 0]
            if not starts:
                return
            here = min(starts)
            claim = next(((a, b) for a, b in self.claimed if a <= here < b), None)
            if claim is not None:
                pos = claim[1]
                continue
            self.candidates += 1
            if calls_left and call_m.start() == here:
                pos = self.call_site(call_m)
            else:
                pos = self.object_site(here)

    def _next_call(self, pos: int) -> re.Match | None:
        m = _next_call_match(self.text, pos)
        if self._spaced is not None:
            s = self._spaced.search(self.text, pos)
            if s is not None and (m is None or s.start() < m.start()):
                return s
        return m

    def _spaced_names(self) -> re.Pattern | None:
        """Offered names that are not identifiers (raw ToolACE writes ``Get Stock Price``), as one pattern."""
        if not self.offered:
            return None
        odd = sorted((n for n in self.offered if n and not _CALL.fullmatch(n + "(")), key=len, reverse=True)[:200]
        if not odd:
            return None
        return re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in odd) + r")[ \t]*\(")

    def context(self, start: int) -> tuple[bool, str, bool]:
        """``(structured, description, in a list)`` for a call or object starting at ``start``."""
        line_start = self.text.rfind("\n", max(self.at, start - PREFIX_CHARS), start) + 1
        if line_start == 0:
            line_start = self.at if start - self.at <= PREFIX_CHARS else -1
        prefix = self.text[line_start:start] if line_start >= 0 else ""
        listed = "[" in prefix[-PREFIX_CHARS:]
        prev = self.last
        if (prev is not None and prev.structured and start - prev.end <= MAX_GAP
                and _STRUCT_GAP.fullmatch(self.text, prev.end, start)):
            return True, prev.context, listed or prev.context == "in a list"
        if self.in_fence(start):
            return True, "in a code fence", listed
        if line_start < 0:
            return False, "in prose", False
        if _STRUCT_PREFIX.fullmatch(prefix):
            return True, "in a list" if listed else "on its own line", listed
        if prefix.rstrip(" \t[('\"`").endswith(":"):
            return True, "after prose", listed
        return False, "in prose", False

    def call_site(self, m: re.Match) -> int:
        """Reads the call whose name ``m`` matched; returns where scanning goes on."""
        start, paren = m.start(1), m.end() - 1
        written = m.group(1).replace("\\_", "_")
        if keyword.iskeyword(written.split(".")[0]):
            return m.end()
        structured, where, listed = self.context(start)
        if not structured:  # a raw ToolACE name with spaces as a list item: "[Get Stock Price(symbol='AAPL')"
            head = _SPACED_HEAD.search(self.text, max(self.at, start - PREFIX_CHARS), start)
            if head is not None and "\n" not in head.group(0):
                written = " ".join(head.group(1).split() + [written])
                start, (structured, where, listed) = head.start(1), (True, "in a list", True)
        name, hit = (written, None) if self.offered is None else _resolve(written, self.offered)
        if (not structured and hit is None) or (self.offered is not None and hit is None and not listed):
            return m.end()  # prose, or a name that is not offered outside a list (code, a sentence)
        quote = self.text[start - 1] if start > self.at else ""
        if quote in ("'", '"'):
            got = self.quoted_call(start - 1, written, name, hit, structured, where, listed)
            if got is not None:
                return got
        close, closed = self.match_paren(paren)
        if not closed and close < len(self.text):
            return m.end()  # not closed within the window: not a call
        end = close + 1 if closed else len(self.text)
        if structured and not listed and where != "in a code fence" and self.sentence_follows(end):
            structured, where = False, "in prose"  # "get_weather() needs a city": a call inside a sentence
            if hit is None:
                return m.end()
        args_src = self.text[paren + 1 : close if closed else len(self.text)]
        call = self.read_call(name, hit, args_src, structured, cut=not closed, listed=listed)
        if call is None:
            return m.end()
        self.add(Site(start, end, [call], "pythonic call", _pythonic_format(), structured, where, self.line_of(start)))
        return end

    def sentence_follows(self, end: int) -> bool:
        """Whether prose follows a call ending at ``end`` on its line (other calls, separators and closing brackets
        do not count)."""
        line_end = self.text.find("\n", end, end + PREFIX_CHARS)
        rest = self.text[end : line_end if line_end >= 0 else end + PREFIX_CHARS].lstrip(_TRAILER)
        return bool(rest) and _CALL.match(rest) is None

    def quoted_call(
        self, q: int, written: str, name: str, hit: str | None, structured: bool, where: str, listed: bool
    ) -> int | None:
        """A call written inside a string literal starting at ``q`` (``['f(a=1)']``): read from the string's value."""
        end = _string_end(self.text, q, MAX_CALL_CHARS)
        if end < 0:
            return None
        self.scanned += end - q
        literal = self.text[q : end + 1]
        value = self._literal_text(literal)
        if not isinstance(value, str):
            return None
        inner = value.strip()
        m = _CALL.match(inner)
        if m is None or m.group(1).replace("\\_", "_") != written or not inner.endswith(")"):
            return None
        if matching_paren(inner, m.end() - 1) != len(inner) - 1:
            return None
        call = self.read_call(name, hit, inner[m.end() : -1], structured, cut=False, listed=listed)
        if call is None:
            return None
        self.add(Site(q, end + 1, [call], "pythonic call quoted as a string", _pythonic_format(), structured, where,
                      self.line_of(q)))
        return end + 1

    def _literal_text(self, literal: str) -> Any:
        self.parsed += len(literal)
        try:
            node = parse_quietly(literal)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        return node.value if isinstance(node, ast.Constant) else None

    def read_call(
        self, name: str, hit: str | None, args_src: str, structured: bool, cut: bool, listed: bool = False
    ) -> ToolCall | None:
        """The call ``name(args_src)``, or None when its arguments are not a call's (see the module docstring)."""
        if cut:  # the text ends inside the call: it is not presented as a complete call (nothing is invented)
            self.notes.append(f"a call to {name} cut off by the end of the text is left out")
            return None
        attempts = [args_src]
        if "\\_" in args_src:
            attempts.append(args_src.replace("\\_", "_"))
        for src_args in attempts:
            src = f"f({src_args})"
            if len(src) > MAX_CALL_CHARS + 3 or self.parsed + len(src) > AST_BUDGET:
                return None
            self.parsed += len(src)
            try:
                node = parse_expr(_READER, src, 0)
            except FormatError:
                continue
            if isinstance(node, ast.Call):
                return self._call_from(name, hit, node, src, structured, listed)
        if structured:  # a call where calls go that Python cannot read (an unescaped quote, say): what a format's
            self.unreadable += 1  # own lenient reader read there is not prose, so salvage does not overrule it
            self.notes.append(f"a call to {name} that could not be read")
        return None

    def _call_from(
        self, name: str, hit: str | None, node: ast.Call, src: str, structured: bool, listed: bool
    ) -> ToolCall | None:
        lit = Literals(_READER, src, 0, strict=False)
        positional = []
        for a in node.args:
            if isinstance(a, ast.Starred) or _kind(a) != "literal":
                return None  # a signature (get_weather(city)) or an expression: not a call to read
            try:
                positional.append(lit.value(a))
            except FormatError:
                return None  # 1e999: no JSON value
        kinds = [_kind(kw.value) for kw in node.keywords]
        if "placeholder" in kinds or (not structured and "expression" in kinds):
            return None
        problems: list[Problem] = []
        try:
            args = lit.arguments(ast.Call(func=node.func, args=[], keywords=node.keywords), problems)
        except (FormatError, RecursionError):
            return None
        if positional:
            params = list(self.offered.get(hit, ()) or ()) if self.offered is not None and hit else None
            if not place_positional(positional, args, params, problems) and not listed:
                return None  # values that cannot be placed, outside a list: code (print("x")) or prose
        self.notes.extend(f"{name}: {p.message}" for p in problems)
        if not structured and not args:
            return None
        return ToolCall(name, args)

    def object_site(self, at: int) -> int:
        """Reads the object starting at ``at`` when it is a call (or a message holding calls); returns where scanning
        goes on."""
        value, end = self._object_value(at)
        if not isinstance(value, dict):
            return at + 1
        named = self.named_object(at, end, value)
        if named is not None:
            return named
        paired = self.pair_object(at, end, value)
        if paired is not None:
            return paired
        structured, where, _ = self.context(at)
        if where == "in prose":
            where = "after prose"
        if _is_spec(value):  # a tool's description quoted, whichever format's shape it has
            return at + 1
        for fmt in by_rank():
            if fmt.detection.bare and fmt.claims_value(value):
                try:
                    calls = [self.unescape_params(c) for c in fmt.parse_lenient(dumps(value)).calls
                             if _usable_name(c.name)]
                except (TypeError, ValueError):
                    calls = []
                if calls:
                    self.add(Site(at, end, calls, f"JSON message ({fmt.name})", fmt.name, True, where,
                                  self.line_of(at)))
                    return end
        name = _object_name(value)
        if name is None:
            return self.keyed_object(at, end, value, structured, where)
        flat = not any(k in value for k in ARG_KEYS) and not isinstance(value.get("function"), dict)
        if flat and not (is_offered(name, self.offered) or self.offered is None and structured):
            return at + 1  # {"name": "Paris", ...} in a sentence, or naming no offered tool: a value, not a call
        label = value.get("label")
        call = coerce_call(value, [], outputs=(label,) if isinstance(label, str) else ())
        if call is None or not _usable_name(call.name):
            return at + 1
        if "\\_" in call.name:  # a markdown-escaped name
            call = ToolCall(call.name.replace("\\_", "_"), call.arguments, call.outputs)
        call = self.unescape_params(call)
        if self.offered is not None:
            resolved, hit = _resolve(call.name, self.offered)
            if hit is not None and resolved != call.name:
                call = ToolCall(resolved, call.arguments, call.outputs)
        fmt_name = next((f.name for f in by_rank() if f.claims_value(value)), None)
        self.add(Site(at, end, [call], "JSON call object", fmt_name, True, where, self.line_of(at)))
        return end

    def keyed_object(self, at: int, end: int, value: dict, structured: bool, where: str) -> int:
        """``{"NAME": {...}}`` (BFCL's answer shape, Apertus's calls): each key a tool name and its value the
        arguments. A call only when every key names an offered tool (several keys: one call each; without tools
        ``{"user": {"id": 1}}`` is data); returns where scanning goes on."""
        if not value or len(value) > 16 or self.offered is None or not all(isinstance(v, dict) for v in value.values()):
            return at + 1
        names = list(value)
        hits = [_resolve(n, self.offered)[1] for n in names]
        if any(h is None for h in hits):
            return at + 1
        calls = [self.unescape_params(ToolCall(h, {str(k): v for k, v in value[n].items()}))
                 for n, h in zip(names, hits)]
        self.add(Site(at, end, calls, "tool name keyed object", None, True, where, self.line_of(at)))
        return end

    def pair_object(self, at: int, end: int, value: dict) -> int | None:
        """``("NAME", {...})`` / ``["NAME", {...}]``: the arguments after the quoted tool name in a pair. A call when
        the name is offered (without tools ``["user", {"id": 1}]`` is data); where scanning goes on, or ``None`` when
        the object is not the second item of such a pair."""
        lo = max(self.at, at - 300)
        if self.offered is None or self.text.rfind(",", lo, at) < 0:
            return None
        m = _PAIR_HEAD.search(self.text, lo, at)
        tail = _PAIR_TAIL.match(self.text, end) if m is not None else None
        if tail is None:
            return None
        written = m.group(2).replace("\\_", "_")
        structured, where, _ = self.context(m.start())
        name = _resolve(written, self.offered)[1]
        if name is None:
            return None
        call = self.unescape_params(ToolCall(name, {str(k): v for k, v in value.items()}))
        self.add(Site(m.start(), tail.end(), [call], "name and arguments pair", None, True,
                      where if structured else "in a list", self.line_of(m.start())))
        return tail.end()

    def unescape_params(self, call: ToolCall) -> ToolCall:
        """``call`` with its markdown-escaped parameter names (``detail\\_level``) read as the names the offered
        tool declares (``detail_level``); as it is without tools, or when the tool declares the name as written."""
        if self.offered is None or not any("\\_" in k for k in call.arguments):
            return call
        declared = self.offered.get(call.name) or ()
        args = {}
        for k, v in call.arguments.items():
            plain = k.replace("\\_", "_")
            args[plain if plain != k and k not in declared and plain in declared and plain not in call.arguments
                 else k] = v
        if args.keys() == call.arguments.keys():
            return call
        self.notes.append(f"{call.name}: markdown-escaped parameter names read as the declared ones")
        return ToolCall(call.name, args, call.outputs, call.step)

    def named_object(self, at: int, end: int, value: dict) -> int | None:
        """The object at ``at`` as the arguments of the tool named right before it: ``NAME{...}`` (Mistral v11's and
        DeepSeek V3.1's calls once their tokens are lost; Kimi-K2's call id ``functions.NAME:0`` too), or, alone in a
        code fence, the name on the line before the fence (DeepSeek V3's layout, its type word ``function`` glued
        before the name once the separator is lost). A call when structured and offered (any name without tools);
        where scanning goes on, or ``None`` when the object is not one."""
        text, lo = self.text, max(self.at, at - PREFIX_CHARS)
        name_end = at
        if not (text[at - 1 : at].isalnum() or text[at - 1 : at] in ("_", ".", "-", ":")):
            # a format's own token between the name and the object: NAME[ARGS]{...} after another format's token
            name_end = next((at - len(t) for t in _tokens() if text.endswith(t, lo, at)), at)
        start = name_end
        while start > lo and (text[start - 1].isalnum() or text[start - 1] in "_.-:"):
            start -= 1
        fenced = start == at
        if fenced:  # NAME \n ```json \n {...}: the name line before the fence, the object alone after it
            line = text.rfind("\n", lo, at)
            if line < 0 or text[line + 1 : at].strip() or not self.in_fence(at):
                return None
            fence = text.rfind("\n", lo, line)
            if fence < 0 or not text[fence + 1 : line].strip().startswith("```"):
                return None
            k = text.rfind("\n", lo, fence)
            if k < 0 and lo > self.at:
                return None
            start = skip_ws(text, k + 1 if k >= 0 else self.at)
            written = text[start:fence].rstrip()
        else:
            written = text[start:name_end]
        m = _NAMED_HEAD.fullmatch(written)
        if m is None:
            return None
        written = m.group(1)
        structured, where, _ = self.context(start)
        if not structured:
            return None
        name, hit = (written, None) if self.offered is None else _resolve(written, self.offered)
        if hit is None and fenced and written.startswith(_V3_TYPE) and self.offered is not None:
            name, hit = _resolve(written[len(_V3_TYPE) :], self.offered)
        if self.offered is not None and hit is None:
            return None
        call = self.unescape_params(ToolCall(hit or name, {str(k): v for k, v in value.items()}))
        self.add(Site(start, end, [call], "named JSON arguments", None, True, where, self.line_of(start)))
        return end

    def _object_value(self, at: int) -> tuple[Any, int]:
        """The value of the object at ``at`` and its end: strict JSON, else a Python literal, else repaired."""
        window = self.text[at : at + MAX_OBJECT_CHARS]
        try:
            value, n = JSON_DECODER.raw_decode(window)
            return value, at + n
        except (ValueError, RecursionError):
            pass
        close, closed = self.match_paren(at)
        if not closed and close < len(self.text):
            return None, at + 1
        span = self.text[at : close + 1]
        if closed and self.parsed + len(span) <= AST_BUDGET:
            self.parsed += len(span)
            try:
                node = parse_quietly(span)
                if isinstance(node, ast.Dict) and _kind(node) != "placeholder":
                    return Literals(_READER, span, 0, strict=False).value(node), close + 1
            except (SyntaxError, ValueError, RecursionError, MemoryError, FormatError):
                pass
        if budget_spent() or not any(k in span for k in ("name", "function", "tool")):
            return None, at + 1
        return lenient_json(span), close + 1 if closed else len(self.text)

    # -- collecting -----------------------------------------------------------------------------------------

    def add(self, site: Site) -> None:
        self.sites.append(site)
        self.last = site

    def result(self) -> Salvage:
        sites = sorted(self.sites, key=lambda s: s.start)
        if any(s.structured for s in sites):
            loose = [s for s in sites if not s.structured]
            if loose:
                self.notes.append(f"{len(loose)} call(s) in prose passed over: the answer holds structured calls")
            sites = [s for s in sites if s.structured]
        for prev, s in zip([None, *sites], sites):  # a group: sites with only separators between them
            same = prev is not None and s.start - prev.end <= MAX_GAP and _GAP.fullmatch(self.text, prev.end, s.start)
            s.group = prev.group if same else (prev.group + 1 if prev else 0)
        calls: list[ToolCall] = []
        seen: dict[str, int] = {}  # call key -> group it was first read in
        kept = []
        for s in sites:
            mine = []
            for c in s.calls:
                key = canonical_json([c.name, dict(c.arguments)])
                if key in seen and seen[key] != s.group:
                    self.notes.append(f"{c.name} written again (line {s.line}): counted once")
                    continue
                seen.setdefault(key, s.group)
                mine.append(c)
            if mine:
                s.calls = mine
                kept.append(s)
                calls.extend(mine)
        if len(calls) > MAX_CALLS:
            self.notes.append(f"only the first {MAX_CALLS} calls kept")
            calls = calls[:MAX_CALLS]
        return Salvage(calls, kept, self.notes)


def _string_end(text: str, q: int, limit: int) -> int:
    """Index of the quote closing the string literal opened at ``q`` (backslash escapes skipped), or -1 within
    ``limit`` characters."""
    quote = text[q]
    i, stop = q + 1, min(len(text), q + limit)
    while i < stop:
        j = text.find(quote, i, stop)
        if j < 0:
            return -1
        k = j
        while k > q + 1 and text[k - 1] == "\\":
            k -= 1
        if (j - k) % 2 == 0:
            return j
        i = j + 1
    return -1


def _kind(node: ast.AST, depth: int = 0) -> str:
    """``"literal"`` (a JSON value written as a Python literal: true/false/null too), ``"placeholder"`` (a bare name or
    ``...``: a signature or template) or ``"expression"`` (anything else: ``math.pi``, ``1/3``)."""
    if depth > 32:
        return "expression"
    if isinstance(node, ast.Constant):
        if node.value is Ellipsis:
            return "placeholder"
        return "literal" if node.value is None or isinstance(node.value, (str, bool, int, float)) else "expression"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return "literal" if isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float) \
            else "expression"
    if isinstance(node, ast.Name):
        return "literal" if node.id in ("true", "false", "null") else "placeholder"
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_kind(e, depth + 1) for e in node.elts]
    elif isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return "expression"
        items = [_kind(e, depth + 1) for e in (*node.keys, *node.values)]
    else:
        return "expression"
    for k in ("placeholder", "expression"):
        if k in items:
            return k
    return "literal"


def _object_name(value: dict) -> str | None:
    for k in NAME_KEYS:
        if isinstance(value.get(k), str) and value[k].strip():
            return value[k]
    fn = value.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"].strip():
        return fn["name"]
    if isinstance(fn, str) and fn.strip():
        return fn
    return None


def _is_spec(value: dict) -> bool:
    """A tool's description quoted (``{"name", "description", "parameters": {"type": "object", "properties"}}``), not
    a call."""
    if "description" in value:
        return True
    args = next((value[k] for k in ARG_KEYS if k in value), None)
    return isinstance(args, dict) and isinstance(args.get("properties"), dict) and isinstance(args.get("type"), str)


def _usable_name(name: str) -> bool:
    return bool(name.strip()) and len(name) <= 256 and "\n" not in name


_PYTHONIC: list[str | None] = []


def _pythonic_format() -> str | None:
    """The first registered format (by rank) that claims untagged pythonic calls."""
    if not _PYTHONIC:
        _PYTHONIC.append(next((f.name for f in by_rank() if f.claims_text("[f(a=1)]")), None))
    return _PYTHONIC[0]


def salvage(
    text: str,
    offered: Mapping[str, Sequence[str]] | None = None,
    known: Mapping[str, Lenient] | None = None,
    markers: Mapping[str, int] | None = None,
) -> Salvage:
    """The calls of ``text`` read wherever they are (see the module docstring). ``offered``: the request's tools, as
    tool name -> its parameter names in declared order, a list or a mapping of each name to its spec (then the
    formats' lenient readers may settle a broken text by the declared types too, as the gate's own reading does);
    None when the request has no tools. ``known``: lenient readings of the whole ``text`` already made with the same
    ``offered``, by format name (not made again); ``markers``: where each registered marker first occurs in ``text``
    (:func:`refiner.formats.base.marker_positions`), when the caller searched it. Never raises."""
    if not isinstance(text, str):
        return Salvage(notes=[f"not a text: {type(text).__name__}"])
    notes = []
    if len(text) > MAX_LENIENT_CHARS:
        notes.append(f"only the first {MAX_LENIENT_CHARS} characters were read")
    with same_texts():
        cut = bool(notes)
        text = prefix(text, MAX_LENIENT_CHARS)
        return _salvage(text, offered, notes, None if cut else known, None if cut else markers)


def _salvage(
    text: str,
    offered: Mapping[str, Sequence[str]] | None,
    notes: list[str],
    known: Mapping[str, Lenient] | None = None,
    markers: Mapping[str, int] | None = None,
) -> Salvage:
    scan = _Scan(text, reasoning_offset(text), offered, known, markers)
    scan.notes.extend(notes)
    complete = not notes
    try:
        with repair_budget():
            scan.tagged()
            scan.scan()
            if offered and not any(site.calls for site in scan.sites):
                scan.by_names()
            if budget_spent():
                complete = False
                scan.notes.append("gave up repairing JSON: the repair budget was spent")
    except Exception as e:  # noqa: BLE001 - never raise: what was read so far stands
        complete = False
        scan.notes.append(f"internal: {type(e).__name__}: {e}"[:300])
    if scan.unreadable:
        complete = False
    if not scan.budget_left():
        complete = False
        scan.notes.append("gave up: the scan's bounds were reached (the rest of the text was not read)")
    out = scan.result()
    out.complete = complete
    out.work = {"candidates": scan.candidates, "scanned": scan.scanned, "marks": scan.marks, "parsed": scan.parsed,
                "names": scan.name_hits}
    return out
