"""Salvage: the tool calls of an answer read wherever the model put them, whatever format it was asked for.

A reader, not a format: tagged regions go to the registered format's own lenient reader, pythonic calls to
:mod:`refiner.formats.pythonic`, JSON to the shared decoder and :mod:`refiner.formats.jsonfix`. Grammar (the text
after any reasoning block)::

    answer := (noise | site)*
    site   := tagged   a registered format's first marker to the end (formats sharing a marker told apart by their
                       sniff hooks; with no marker, the first format whose closer occurs reads the whole text)
            | named    NAME [a format's token] {...}, Kimi-K2's functions.NAME:0{...}, or NAME on the line before a
                       code fence holding the object (DeepSeek V3's layout)
            | object   {...} as JSON, a Python dict literal or repaired: a message a bare format claims, or a call
                       object (name / tool_name / function.name ... and arguments / parameters / input / args)
            | keyed    {NAME: {...}, ...}, every key an offered tool (BFCL's answer shape)
            | pair     ("NAME", {...}) or ["NAME", {...}], NAME offered
            | call     NAME(args), NAME dotted (\\_ read as _, a namespace such as functions. dropped for an offered
                       tool); keyword literals, positional ones placed on the offered tool's declared parameters
            | quoted   a string literal holding exactly one call
            | by names markup no format knows, read by :mod:`refiner.formats.markup` when nothing else gave a call

A call is *structured* in a code fence, after a line prefix of list brackets, quotes, bullets, numbering, tags,
``return`` / ``await`` / ``>>>`` or an assignment, after a line ending with ``:``, or right after another structured
call with only separators between; tagged regions and call objects are structured. A structured call counts; a
loose one (inside a sentence) counts only for an offered tool, with literal arguments, when the answer holds no
structured call. With tools, a name not offered counts only in a list, a tagged region or a call object. A
placeholder argument (``f(city)``, ``f(x=...)``) makes a signature, not a call. A call written again in another
site counts once; a call cut off by the end of the text is left out.

Bounded by :data:`MAX_TAGGED_FORMATS` formats read, :data:`MAX_CANDIDATES` sites examined, :data:`SCAN_BUDGET`
characters and :data:`MARK_BUDGET` marks of bracket matching, :data:`AST_BUDGET` characters parsed, and one shared
:func:`~refiner.formats.jsonfix.repair_budget`. Never raises.
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
)
from refiner.formats.jsonfix import budget_spent, lenient_json, repair_budget
from refiner.formats.lenient import ARG_KEYS, NAME_KEYS, coerce_call
from refiner.formats.markup import KIND, calls_by_names
from refiner.formats.pythonic import Literals, matching_paren, parse_expr, parse_quietly, place_positional
from refiner.formats.pythonic_scan import STRICT_STRING
from refiner.formats.reasoning import read
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
MAX_TAGGED_FORMATS = 4  # formats whose markers occur that read their regions (the first by position)
MAX_GAP = 64  # separators between two sites of one group
MAX_NAME_CHARS = 256  # of a call's name and the blanks after it
MAX_PAREN_MISSES = 256  # "(" looked at where no call ends, before one search of the rest


class _Reader(WireFormat):
    """Names the errors of the pythonic helpers (never registered)."""

    name = "salvage"


_READER = _Reader()
_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_SPELLING = re.compile(r"[\w.\- ]{1,256}")  # what another spelling of a tool name may hold
# A call: a dotted identifier (markdown-escaped underscores allowed) not inside a longer name, then "(".
_CALL = re.compile(r"(?<![\w.\\])([^\W\d](?:\w|\\_)*(?:\.[^\W\d](?:\w|\\_)*)*)[ \t]*\(")
_PAREN_AFTER_WORD = re.compile(r"[\w \t]\(")  # where a call may end: _CALL runs only in the name window before it
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
_SPACED_HEAD = re.compile(r"[\[,][ \t]*((?:[^\W\d]\w*[ \t]+){1,6})\Z")  # a list item's tool name written with spaces
_GAP = re.compile(r"[\s,;'\"]*")  # between two calls of one group
_STRUCT_GAP = re.compile(r"[\s,;'\"\[\]()+]*")  # between two structured calls ("+" joins lists)
_PAIR_HEAD = re.compile(r"[\[(][ \t]*(['\"])([^'\"\n]{1,256})\1[ \t]*,[ \t\n]*\Z")
_PAIR_TAIL = re.compile(r"[ \t\n]*[\])]")
_NAMESPACE = ("functions", "function", "tools", "tool", "default_api", "api")
_NAMED_HEAD = re.compile(r"(?:functions\.)?([^\W\d][\w.\-]*?)(?::\d+)?")  # NAME, or Kimi-K2's functions.NAME:0
_V3_TYPE = "function"


def _next_call_match(text: str, pos: int) -> re.Match | None:
    """``_CALL.search(text, pos)``, with the lookbehind pattern run only in the name window before each "(" that
    could end a call."""
    for _ in range(MAX_PAREN_MISSES):
        p = _PAREN_AFTER_WORD.search(text, pos)
        if p is None:
            return None
        m = _CALL.search(text, max(pos, p.end() - 1 - MAX_NAME_CHARS), p.end())
        if m is not None:
            return m
        pos = p.end()
    return _CALL.search(text, pos)


@functools.lru_cache(maxsize=1)
def _tokens() -> tuple[str, ...]:
    """Every registered format's markers and closers that may stand between a tool name and its arguments."""
    return tuple(m for f in by_rank() for m in (*f.detection.markers, *f.detection.closers) if len(m) > 2)


@functools.lru_cache(maxsize=1)
def _pythonic_format() -> str | None:
    """The first registered format (by rank) that claims untagged pythonic calls."""
    return next((f.name for f in by_rank() if f.claims_text("[f(a=1)]")), None)


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
    work: dict[str, int] = field(default_factory=dict)  # candidates, scanned, marks, parsed, names

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
        parts = []
        for (kind, context), (n, line) in list(seen.items())[:limit]:
            head, sep, tail = kind.partition(" (")
            parts.append(f"{n} {kind if n == 1 else f'{head}s{sep}{tail}'} {context} (line {line})")
        if len(seen) > limit:
            parts.append(f"{len(seen) - limit} more")
        return "; ".join(parts) if parts else "no call"


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

    def __init__(self, text: str, body_at: int, offered: Mapping[str, Sequence[str]] | None,
                 known: Mapping[str, Lenient] | None = None, markers: Mapping[str, int] | None = None,
                 tried: Mapping[str, list[ToolCall] | FormatError] | None = None) -> None:
        self.text = text
        self.at = body_at
        self.offered = offered
        self.known = known or {}  # the lenient readings of the whole text already made, by format name
        self.tried = tried or {}  # the strict readings of the whole text already made, by format name
        self.markers = markers  # where each registered marker first occurs in the text, when already searched
        self.candidates = self.scanned = self.marks = self.parsed = 0  # marks: brackets and commas matched
        self.sites: list[Site] = []
        self.notes: list[str] = []
        self.unreadable = 0  # structured calls that could not be read
        self.name_hits = 0  # occurrences of offered names examined by the markup reader
        marks, i = [], text.find("```", body_at)  # fenced blocks (an unclosed one runs to the end)
        while i >= 0 and len(marks) < 2 * MAX_FENCES:
            marks.append(i)
            i = text.find("```", i + 3)
        if len(marks) % 2:
            marks.append(len(text))
        self.fences = list(zip(marks[::2], marks[1::2]))
        self.claimed: list[tuple[int, int]] = []
        self.last: Site | None = None  # the last site the left-to-right scan read
        self._spaced = self._spaced_names()

    def in_fence(self, pos: int) -> bool:
        k = bisect.bisect_right(self.fences, (pos, len(self.text) + 1)) - 1
        return k >= 0 and self.fences[k][0] <= pos < self.fences[k][1]

    def line_of(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1

    def site(self, start: int, end: int, calls: list[ToolCall], kind: str, fmt: str | None, where: str,
             structured: bool = True, by_names: bool = False) -> Site:
        return Site(start, end, calls, kind, fmt, structured, where, self.line_of(start), by_names=by_names)

    def placed(self, start: int) -> str:
        return "after prose" if self.text[self.at : start].strip() else "at the start"

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
        return (self.candidates < MAX_CANDIDATES and self.scanned < SCAN_BUDGET and self.marks < MARK_BUDGET
                and self.parsed < AST_BUDGET and len(self.sites) < MAX_SITES)

    # -- tagged regions, by the registry ---------------------------------------------------------------------

    def tagged(self) -> None:
        """A site per registered format whose marker occurs: its first marker to its last closer, read by it."""
        body = self.text
        chosen: dict[str, tuple[WireFormat, int, str]] = {}
        found_at = self.markers if self.markers is not None else marker_positions(body)

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
        ranked = [f for f in by_rank() if f.detection.markers]
        if not chosen and found_at:  # no marker: a format whose closer occurs reads the whole text
            for fmt in ranked:
                found = [c for c in fmt.detection.closers if find(c) >= 0]
                if found:
                    chosen[fmt.name] = (fmt, self.at, found[0])
                    break
        if not chosen and self.offered:  # no tag at all: calls told by the offered tools' names alone
            self.untagged(ranked)
        regions = sorted(chosen.values(), key=lambda t: t[1])
        if len(regions) > MAX_TAGGED_FORMATS:
            self.notes.append(f"markers of {len(regions)} formats: only the first {MAX_TAGGED_FORMATS} were read")
            self.unreadable += 1
            regions = regions[:MAX_TAGGED_FORMATS]
            chosen = {fmt.name: (fmt, start, marker) for fmt, start, marker in regions}
        # the parts a format's grammar marks as the answer (gpt-oss's final channel) hold no call
        answers = {name: fmt.answer_spans(body, self.at) for name, (fmt, _, _) in chosen.items()}
        for fmt, start, marker in regions:
            if any(a <= start < b for a, b in self.claimed) or any(
                    a <= start < b for name, spans in answers.items() if name != fmt.name for a, b in spans):
                continue
            start = max([self.at, fmt.region_start(body, start)] + [b for a, b in self.claimed if b <= start])
            # the format reads to the end of the text; the region claimed from the other readers ends after its last
            # closer when one follows its last marker
            close = max((body.rfind(c) + len(c) for c in fmt.detection.closers), default=-1)
            end = close if close > max(body.rfind(m) + len(m) for m in fmt.detection.markers) else len(body)
            whole = start == skip_ws(body, self.at)  # (then a reading of the whole text already made is taken)
            got = self.known.get(fmt.name) if whole else None
            if got is None:
                error = self.tried.get(fmt.name) if whole else None
                got = fmt.parse_lenient(body if whole else body[start:], tools=self.offered,
                                        strict_error=error if isinstance(error, FormatError) else None)
            cut = got.cut.index if got.cut is not None and not got.cut.clean else None  # stopped mid-value: left out
            calls = [self.unescape_params(c) for n, c in enumerate(got.calls) if n != cut and _usable_name(c.name)]
            if calls:
                where = "in a code fence" if self.in_fence(start) else self.placed(start)
                self.sites.append(self.site(start, end, calls, f"{marker} block ({fmt.name})", fmt.name, where))
            # a call the format read as cut, or whose id names no tool (Kimi-K2's functions.invalid.0), is no other
            # reader's to take
            if calls or cut is not None or any(p.code == "unnamed_call" for p in got.problems):
                self.claimed.append((start, end))
        self.claimed.extend(span for spans in answers.values() for span in spans)

    def by_names(self) -> None:
        """Calls in markup no format knows, found by the offered tools' names and parameter names: a site each."""
        found, notes, self.name_hits = calls_by_names(self.text, self.at, self.offered or {}, self.claimed)
        self.notes.extend(notes)
        for f in found:
            self.add(self.site(f.start, f.end, [f.call], f"{KIND} ({f.how})", None, self.placed(f.start),
                               by_names=True))
        if found:
            self.notes.append(f"{len(found)} call(s) found only by the offered tool and parameter names, in markup "
                              "no format knows")

    def untagged(self, ranked: Sequence[WireFormat]) -> None:
        """One site: the first format that reads calls in a text holding none of its tags, by the offered tools."""
        for fmt in ranked:
            got = fmt.read_untagged(self.text, self.at, self.offered)
            if got is not None:
                start, end, calls = got
                self.sites.append(self.site(start, end, calls, f"untagged call ({fmt.name})", fmt.name,
                                            self.placed(start)))
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
            pos = self.call_site(call_m) if calls_left and call_m.start() == here else self.object_site(here)

    def _next_call(self, pos: int) -> re.Match | None:
        m = _next_call_match(self.text, pos)
        if self._spaced is not None:
            s = self._spaced.search(self.text, pos)
            if s is not None and (m is None or s.start() < m.start()):
                return s
        return m

    def _spaced_names(self) -> re.Pattern | None:
        """Offered names that are not identifiers (raw ToolACE writes ``Get Stock Price``), as one pattern."""
        odd = sorted((n for n in self.offered or () if n and not _CALL.fullmatch(n + "(")), key=len, reverse=True)
        if not odd:
            return None
        return re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in odd[:200]) + r")[ \t]*\(")

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
        if start > self.at and self.text[start - 1] in ("'", '"'):
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
        self.add(self.site(start, end, [call], "pythonic call", _pythonic_format(), where, structured))
        return end

    def sentence_follows(self, end: int) -> bool:
        """Whether prose follows a call ending at ``end`` on its line (not other calls, separators or closers)."""
        line_end = self.text.find("\n", end, end + PREFIX_CHARS)
        rest = self.text[end : line_end if line_end >= 0 else end + PREFIX_CHARS].lstrip(_TRAILER)
        return bool(rest) and _CALL.match(rest) is None

    def quoted_call(
        self, q: int, written: str, name: str, hit: str | None, structured: bool, where: str, listed: bool
    ) -> int | None:
        """A call written inside a string literal starting at ``q`` (``['f(a=1)']``): read from the string's value."""
        m = STRICT_STRING[self.text[q]].match(self.text, q, q + MAX_CALL_CHARS)
        if m is None:
            return None
        self.scanned += m.end() - 1 - q
        self.parsed += m.end() - q
        try:
            node = parse_quietly(m.group())
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            return None
        inner = node.value.strip()
        c = _CALL.match(inner)
        if c is None or c.group(1).replace("\\_", "_") != written or not inner.endswith(")"):
            return None
        if matching_paren(inner, c.end() - 1) != len(inner) - 1:
            return None
        call = self.read_call(name, hit, inner[c.end() : -1], structured, cut=False, listed=listed)
        if call is None:
            return None
        self.add(self.site(q, m.end(), [call], "pythonic call quoted as a string", _pythonic_format(), where,
                           structured))
        return m.end()

    def read_call(
        self, name: str, hit: str | None, args_src: str, structured: bool, cut: bool, listed: bool = False
    ) -> ToolCall | None:
        """The call ``name(args_src)``, or None when its arguments are not a call's (see the module docstring)."""
        if cut:  # the text ends inside the call: it is not presented as a complete call (nothing is invented)
            self.notes.append(f"a call to {name} cut off by the end of the text is left out")
            return None
        attempts = [args_src] + ([args_src.replace("\\_", "_")] if "\\_" in args_src else [])
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
        if structured:  # a call where calls go that Python cannot read: a format's own reading there is not prose
            self.unreadable += 1
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
        goes on. What its Python literal was read as otherwise than written (bytes as text) is noted with its calls."""
        problems: list[Problem] = []
        value, end = self._object_value(at, problems)
        sites = len(self.sites)
        pos = self._object_calls(at, end, value)
        if len(self.sites) > sites:
            self.notes.extend(p.message for p in problems)
        return pos

    def _object_calls(self, at: int, end: int, value: Any) -> int:
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
                    self.add(self.site(at, end, calls, f"JSON message ({fmt.name})", fmt.name, where))
                    return end
        name = _object_name(value)
        if name is None:
            return self.keyed_object(at, end, value, where)
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
        self.add(self.site(at, end, [call], "JSON call object", fmt_name, where))
        return end

    def keyed_object(self, at: int, end: int, value: dict, where: str) -> int:
        """``{"NAME": {...}}`` (BFCL's answer shape): a call per key when every key names an offered tool."""
        if not value or len(value) > 16 or self.offered is None or not all(isinstance(v, dict) for v in value.values()):
            return at + 1
        hits = [_resolve(n, self.offered)[1] for n in value]
        if any(h is None for h in hits):
            return at + 1
        calls = [self.args_call(h, v) for h, v in zip(hits, value.values())]
        self.add(self.site(at, end, calls, "tool name keyed object", None, where))
        return end

    def pair_object(self, at: int, end: int, value: dict) -> int | None:
        """``("NAME", {...})`` / ``["NAME", {...}]`` with NAME offered: where scanning goes on, or ``None`` when the
        object is not the second item of such a pair."""
        lo = max(self.at, at - 300)
        if self.offered is None or self.text.rfind(",", lo, at) < 0:
            return None
        m = _PAIR_HEAD.search(self.text, lo, at)
        tail = _PAIR_TAIL.match(self.text, end) if m is not None else None
        if tail is None:
            return None
        structured, where, _ = self.context(m.start())
        name = _resolve(m.group(2).replace("\\_", "_"), self.offered)[1]
        if name is None:
            return None
        self.add(self.site(m.start(), tail.end(), [self.args_call(name, value)], "name and arguments pair", None,
                           where if structured else "in a list"))
        return tail.end()

    def args_call(self, name: str, args: dict) -> ToolCall:
        return self.unescape_params(ToolCall(name, {str(k): v for k, v in args.items()}))

    def unescape_params(self, call: ToolCall) -> ToolCall:
        """``call`` with its markdown-escaped parameter names (``detail\\_level``) read as the names the offered
        tool declares."""
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
        """The object at ``at`` as the arguments of the tool named right before it (``NAME{...}``, a format's token
        between them, Kimi-K2's ``functions.NAME:0``), or on the line before the code fence it is alone in (DeepSeek
        V3, its type word ``function`` glued before the name). Where scanning goes on, or ``None``."""
        text, lo = self.text, max(self.at, at - PREFIX_CHARS)
        name_end = at
        if not (text[at - 1 : at].isalnum() or text[at - 1 : at] in ("_", ".", "-", ":")):
            name_end = next((at - len(t) for t in _tokens() if text.endswith(t, lo, at)), at)
        start = name_end
        while start > lo and (text[start - 1].isalnum() or text[start - 1] in "_.-:"):
            start -= 1
        fenced = start == at
        if fenced:  # NAME \n ```json \n {...}
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
        self.add(self.site(start, end, [self.args_call(hit or name, value)], "named JSON arguments", None, where))
        return end

    def _object_value(self, at: int, problems: list[Problem]) -> tuple[Any, int]:
        """The value of the object at ``at`` and its end: strict JSON, else a Python literal, else repaired."""
        try:
            value, n = JSON_DECODER.raw_decode(self.text[at : at + MAX_OBJECT_CHARS])
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
                    return Literals(_READER, span, 0, strict=False, problems=problems).value(node), close + 1
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


def _kind(node: ast.AST, depth: int = 0) -> str:
    """``"literal"`` (a JSON value, true/false/null too), ``"placeholder"`` (a bare name or ``...``: a signature) or
    ``"expression"`` (anything else: ``math.pi``, ``1/3``)."""
    if depth > 32:
        return "expression"
    if isinstance(node, ast.Constant):
        if node.value is Ellipsis:
            return "placeholder"
        return "literal" if node.value is None or isinstance(node.value, (str, bool, int, float)) else "expression"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        numeric = isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float)
        return "literal" if numeric else "expression"
    if isinstance(node, ast.Name):
        return "literal" if node.id in ("true", "false", "null") else "placeholder"
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_kind(e, depth + 1) for e in node.elts]
    elif isinstance(node, ast.Dict) and None not in node.keys:
        items = [_kind(e, depth + 1) for e in (*node.keys, *node.values)]
    else:
        return "expression"
    return next((k for k in ("placeholder", "expression") if k in items), "literal")


def _object_name(value: dict) -> str | None:
    fn = value.get("function")
    fn_name = fn.get("name") if isinstance(fn, dict) else fn
    names = [value.get(k) for k in NAME_KEYS] + [fn_name]
    return next((n for n in names if isinstance(n, str) and n.strip()), None)


def _is_spec(value: dict) -> bool:
    """A tool's description quoted, not a call."""
    if "description" in value:
        return True
    args = next((value[k] for k in ARG_KEYS if k in value), None)
    return isinstance(args, dict) and isinstance(args.get("properties"), dict) and isinstance(args.get("type"), str)


def _usable_name(name: str) -> bool:
    return bool(name.strip()) and len(name) <= 256 and "\n" not in name


def salvage(
    text: str,
    offered: Mapping[str, Sequence[str]] | None = None,
    known: Mapping[str, Lenient] | None = None,
    markers: Mapping[str, int] | None = None,
    tried: Mapping[str, list[ToolCall] | FormatError] | None = None,
) -> Salvage:
    """The calls of ``text`` read wherever they are. ``offered``: the request's tools, as tool name -> its parameter
    names in declared order (or their specs, which the formats' lenient readers then type values by); None without
    tools. ``known``: lenient readings of the whole ``text`` already made with the same ``offered``, by format name;
    ``markers``: where each registered marker first occurs in ``text`` (:func:`refiner.formats.base.marker_positions`);
    ``tried``: the strict readings of the whole ``text`` already made, by format name (the calls or the
    :class:`~refiner.formats.base.FormatError`). Never raises."""
    if not isinstance(text, str):
        return Salvage(notes=[f"not a text: {type(text).__name__}"])
    cut = len(text) > MAX_LENIENT_CHARS
    text = read(text[:MAX_LENIENT_CHARS] if cut else text)
    scan = _Scan(text, reasoning_offset(text), offered, None if cut else known, None if cut else markers,
                 None if cut else tried)
    if cut:
        scan.notes.append(f"only the first {MAX_LENIENT_CHARS} characters were read")
    complete = not cut
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
    if not scan.budget_left():
        complete = False
        scan.notes.append("gave up: the scan's bounds were reached (the rest of the text was not read)")
    out = scan.result()
    out.complete = complete and not scan.unreadable
    out.work = {"candidates": scan.candidates, "scanned": scan.scanned, "marks": scan.marks, "parsed": scan.parsed,
                "names": scan.name_hits}
    return out
