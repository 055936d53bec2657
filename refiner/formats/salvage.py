"""Salvage: the tool calls of an answer read wherever the model put them, whatever format it was asked for.

A reader, not a format: tagged regions go to their format's lenient reader, JSON to the shared decoder and
:mod:`refiner.formats.jsonfix`, pythonic calls to :mod:`refiner.formats.pythonic`. Grammar (after any reasoning)::

    answer := (noise | site)*
    site   := tagged   a registered format's first marker to the end (formats sharing a marker told apart by their
                       sniff hooks; with no marker, the first format whose closer occurs reads the whole text; a
                       row's line label, as written or written wrong, from the line before it)
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
call with only separators between; tagged regions and call objects are structured. A structured call counts; a loose one
(inside a sentence) counts only for an offered tool, with literal arguments, when the answer holds no structured call.
With tools, a name not offered counts only in a list, a tagged region or a call object. A placeholder argument
(``f(city)``, ``f(x=...)``) makes a signature, not a call. A call written again in another site counts once; a call cut
off by the end of the text is left out. Bounded by :data:`MAX_TAGGED_FORMATS` formats read, :data:`MAX_CANDIDATES` sites
examined, :data:`SCAN_BUDGET` characters and :data:`MARK_BUDGET` marks of bracket matching, :data:`AST_BUDGET`
characters parsed, and one shared :func:`~refiner.formats.jsonfix.repair_budget`. Never raises."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from refiner.calls import ToolCall, canonical_json
from refiner.formats.base import (
    MAX_LENIENT_CHARS,
    FormatError,
    Lenient,
    WireFormat,
    get,
    marker_positions,
    marker_table,
)
from refiner.formats.jsonfix import budget_spent, repair_budget
from refiner.formats.lenient import TokenFinder
from refiner.formats.markup import KIND, calls_by_names
from refiner.formats.pythonic_scan import Brackets
from refiner.formats.reasoning import labelled_formats, read
from refiner.formats.salvage_sites import (  # noqa: F401 - is_offered, normalise: read through this module
    AST_BUDGET,
    CALL,
    MAX_CALL_CHARS,
    PREFIX_CHARS,
    SiteReader,
    is_offered,
    normalise,
    usable_name,
)
from refiner.formats.text import reasoning_offset, skip_ws

MAX_CANDIDATES = 256  # candidate sites examined (call names followed by "(", "{" positions)
MAX_SITES = 64  # sites read
MAX_CALLS = 128  # calls returned
SCAN_BUDGET = 65_536  # characters of bracket matching in all
MARK_BUDGET = 8_192  # brackets and commas passed by bracket matching in all (a bracket storm is all marks)
MAX_FENCES = 256
MAX_TAGGED_FORMATS = 4  # formats whose markers occur that read their regions (the first by position)
MAX_GAP = 64  # separators between two sites of one group
MAX_NAME_CHARS = 256  # of a call's name and the blanks after it
MAX_PAREN_MISSES = 256  # "(" looked at where no call ends, before one search of the rest


# Where a call may end: _CALL runs only in the name window before it. Its "(" is matched first, then the character
# before it (a pattern that starts with a literal is searched for at C speed), so a search from ``at`` starts at at + 1.
_PAREN_AFTER_WORD = re.compile(r"\((?<=[\w \t]\()")
# Before a structured call on its line: tags, bullets, numbering, code keywords, an assignment, brackets and quotes.
_STRUCT_PREFIX = re.compile(
    r"(?:<[^<>\n]{1,40}>|[\s>*+\-•|])*"
    r"(?:\d{1,3}[.)]\s+)?"
    r"(?:(?:return|await|yield|print|>>>|\$)\s*)?"
    r"(?:[^\W\d][\w.]*\s*=\s*)?"
    r"[\s\[('\"`]*"
)
_FENCE = re.compile("```")
_GAP = re.compile(r"[\s,;'\"]*")  # between two calls of one group
_STRUCT_GAP = re.compile(r"[\s,;'\"\[\]()+]*")  # between two structured calls ("+" joins lists)


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
        return next((s.fmt for s in self.sites if s.fmt), None)

    def describe(self, limit: int = 4) -> str:
        """Where the calls were found, for people: ``"2 pythonic calls in a code fence (line 3); ..."``."""
        seen: dict[tuple[str, str], list[int]] = {}
        for s in self.sites:
            seen.setdefault((s.kind, s.context), [0, s.line])[0] += len(s.calls)
        parts = [f"{n} {kind if n == 1 else '{}s{}{}'.format(*kind.partition(' ('))} {context} (line {line})"
                 for (kind, context), (n, line) in list(seen.items())[:limit]]
        return "; ".join(parts + [f"{len(seen) - limit} more"] * (len(seen) > limit)) or "no call"


class _Scan(SiteReader):
    """One salvage pass over one text (state: budgets, fences, sites)."""

    def __init__(self, text: str, body_at: int, offered: Mapping[str, Sequence[str]] | None,
                 known: Mapping[str, Lenient] | None = None, markers: Mapping[str, int] | None = None,
                 tried: Mapping[str, list[ToolCall] | FormatError] | None = None,
                 sniffed: Mapping[tuple[str, int], WireFormat] | None = None) -> None:
        self.text = text
        self.at = body_at
        self.offered = offered
        self.known = known or {}  # the lenient readings of the whole text already made, by format name
        self.tried = tried or {}  # the strict readings of the whole text already made, by format name
        self.markers = markers  # where each registered marker first occurs in the text, when already searched
        self.sniffed = sniffed or {}  # the format chosen by (marker, position after the reasoning), when judged
        self.candidates = self.scanned = self.marks = self.parsed = 0  # marks: brackets and commas matched
        self.sites: list[Site] = []
        self.notes: list[str] = []
        self.unreadable = 0  # structured calls that could not be read
        self.name_hits = 0  # occurrences of offered names examined by the markup reader
        # fenced blocks (an unclosed one runs to the end)
        marks = [m.start() for m in itertools.islice(_FENCE.finditer(text, body_at), 2 * MAX_FENCES)] + [len(text)]
        self.fences = list(zip(marks[::2], marks[1::2]))
        self.brackets = Brackets(text)  # (every site's brackets matched by one pairing of the text's)
        self.claimed: list[tuple[int, int]] = []
        self.last: Site | None = None  # the last site the left-to-right scan read
        # offered names that are not identifiers (raw ToolACE writes ``Get Stock Price``), as one pattern
        odd = sorted((n for n in offered or () if n and not CALL.fullmatch(n + "(")), key=len, reverse=True)[:200]
        self._spaced = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, odd)) + r")[ \t]*\(") if odd else None

    def in_fence(self, pos: int) -> bool:
        k = bisect.bisect_right(self.fences, (pos, len(self.text) + 1)) - 1
        return k >= 0 and self.fences[k][0] <= pos < self.fences[k][1]

    def add(self, start: int, end: int, calls: list[ToolCall], kind: str, fmt: str | None, where: str,
            structured: bool = True, by_names: bool = False) -> None:
        self.last = Site(start, end, calls, kind, fmt, structured, where, self.text.count("\n", 0, start) + 1,
                         by_names=by_names)
        self.sites.append(self.last)

    def placed(self, start: int) -> str:
        return "after prose" if self.text[self.at : start].strip() else "at the start"

    def match_paren(self, open_at: int) -> tuple[int, bool]:
        """``(index of the matching closer, closed)`` for the bracket at ``open_at``, within MAX_CALL_CHARS; when it is
        not closed there, ``(end of the window, False)``."""
        end = min(open_at + MAX_CALL_CHARS, len(self.text))
        j = self.brackets.closer(open_at, end, MARK_BUDGET - self.marks)
        if j < 0:  # the marks ran out: nothing more is matched
            self.marks = MARK_BUDGET
            return end, False
        span_end = min(j + 1, end)
        self.scanned += span_end - open_at
        self.marks += sum(self.text.count(c, open_at, span_end) for c in "()[]{},")
        return j, j < end

    def budget_left(self) -> bool:
        return (self.candidates < MAX_CANDIDATES and self.scanned < SCAN_BUDGET and self.marks < MARK_BUDGET
                and self.parsed < AST_BUDGET and len(self.sites) < MAX_SITES)

    # -- tagged regions, by the registry ---------------------------------------------------------------------

    def tagged(self) -> None:
        """A site per registered format whose marker occurs: its first marker to its last closer, read by it."""
        body = self.text
        chosen: dict[str, tuple[WireFormat, int, str]] = {}
        found_at = self.markers if self.markers is not None else marker_positions(body)
        table = marker_table()
        naming, order = table.naming["markers"], table.marker_order  # (every registered marker, by its formats)
        # a JSON value the text starts with holds no marker or closer in its strings (one cut open runs to the end)
        edge, first = self.at, skip_ws(body, self.at)
        if found_at and body[first : first + 1] in ("{", "["):
            edge = TokenFinder(body, tuple(sorted(found_at))).first(self.at)[0]

        def find(marker: str) -> int:  # where ``marker`` first occurs after the reasoning, outside those strings
            i = found_at.get(marker, -1)
            return body.find(marker, edge) if 0 <= i < edge else i  # (edge: at or after the reasoning's end)

        # the markers found, and those written at a line start, in rank order
        walked = sorted({*(m for m in found_at if m in order), *table.line_markers}, key=order.__getitem__)
        answer = body[self.at :] if self.at else body  # (what the sniffs are asked of)
        for marker in walked:
            i = find(marker)
            # a marker at a line start (Functionary's >>>): the text's first line is one
            if marker[:1] == "\n" and body.startswith(marker[1:], first) and (i < 0 or first < i):
                i = first
            if i < 0:
                continue
            fmt = self.sniffed.get((marker, i - self.at)) or next(
                (f for f in naming[marker] if f.sniff(answer, i - self.at)), naming[marker][-1])
            if fmt.name not in chosen or i < chosen[fmt.name][1]:
                chosen[fmt.name] = (fmt, i, marker)
        if not chosen and found_at:  # no marker: a format whose closer occurs reads the whole text
            hit = next(((f, c) for f in table.with_markers for c in f.detection.closers if find(c) >= 0), None)
            if hit is not None:
                chosen[hit[0].name] = (hit[0], self.at, hit[1])
        if not chosen and self.offered:  # no tag at all: the first format reading calls by the offered tools' names
            for fmt in table.reading_untagged:
                if (got := fmt.read_untagged(self.text, self.at, self.offered)) is not None:  # (start, end, calls)
                    self.add(*got, f"untagged call ({fmt.name})", fmt.name, self.placed(got[0]))
                    self.claimed.append((got[0], got[1]))
                    break
        # a row that writes line labels reads from the line before its first label standing at a line start, as written
        # or written wrong (Acti_on: for ReAct's Action:): its reader reads calls at its labels only
        for name, i in labelled_formats(body, edge).items():
            if name not in chosen and not any(a <= i < b for a, b in self.claimed):
                fmt = get(name)
                chosen[name] = (fmt, max(edge, body.rfind("\n", 0, max(i - 1, 0)) + 1), fmt.detection.markers[0])
        regions = sorted(chosen.values(), key=lambda t: t[1])
        if len(regions) > MAX_TAGGED_FORMATS:
            self.notes.append(f"markers of {len(regions)} formats: only the first {MAX_TAGGED_FORMATS} were read")
            self.unreadable += 1
            regions = regions[:MAX_TAGGED_FORMATS]
        # the parts a format's grammar marks as the answer (gpt-oss's final channel) hold no call
        answers = {fmt.name: fmt.answer_spans(body, self.at) for fmt, _, _ in regions}
        for fmt, start, marker in regions:
            if any(a <= start < b for a, b in self.claimed) or any(
                    a <= start < b for name, spans in answers.items() if name != fmt.name for a, b in spans):
                continue
            start = max([self.at, fmt.region_start(body, start)] + [b for a, b in self.claimed if b <= start])
            whole = start == first  # (then a reading of the whole text already made is taken)
            got = self.known.get(fmt.name) if whole else None
            if got is None:
                error = self.tried.get(fmt.name) if whole else None
                got = fmt.parse_lenient(body if whole else body[start:], tools=self.offered,
                                        strict_error=error if isinstance(error, FormatError) else None)
            cut = got.cut.index if got.cut is not None and not got.cut.clean else None  # stopped mid-value: left out
            # the format reads to the text's end; the region claimed from the other readers ends after its last closer
            # when one follows its last marker, unless the text stops inside a call (a cut, or a call or bracket left
            # open: a closer such as DeepSeek's <｜tool▁sep｜> comes before the arguments) or in a token of the format
            closers, markers = fmt.detection.closers, fmt.detection.markers
            close = max((body.rfind(c) + len(c) for c in closers), default=-1)
            stops = (got.cut is not None or any(p.code == "unclosed" for p in got.problems)
                     or _ends_in_token(body, close, closers + markers))
            end = close if close > max(body.rfind(m) + len(m) for m in markers) and not stops else len(body)
            calls = [self.unescape_params(c) for n, c in enumerate(got.calls) if n != cut and usable_name(c.name)]
            if calls:
                where = "in a code fence" if self.in_fence(start) else self.placed(start)
                self.add(start, end, calls, f"{marker} block ({fmt.name})", fmt.name, where)
            # a call read as cut, or whose id names no tool (Kimi-K2's functions.invalid.0), is no other reader's
            if calls or cut is not None or any(p.code == "unnamed_call" for p in got.problems):
                self.claimed.append((start, end))
        self.claimed.extend(span for spans in answers.values() for span in spans)

    def by_names(self) -> None:
        """Calls in markup no format knows, found by the offered tools' names and parameter names: a site each."""
        found, notes, self.name_hits = calls_by_names(self.text, self.at, self.offered or {}, self.claimed)
        self.notes.extend(notes)
        for f in found:
            self.add(f.start, f.end, [f.call], f"{KIND} ({f.how})", None, self.placed(f.start), by_names=True)
        if found:
            self.notes.append(f"{len(found)} call(s) found only by the offered tool and parameter names, in markup "
                              "no format knows")

    # -- the scan for calls and call objects ------------------------------------------------------------------

    def scan(self) -> None:
        text, pos = self.text, self.at
        self.last = None  # (a call right after a tagged region is not structured by it)
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
        """The first of ``CALL.search(text, pos)`` (its lookbehind run only in the name window before each "(" that
        could end a call) and an offered name written with spaces."""
        text, at, m = self.text, pos, None
        for _ in range(MAX_PAREN_MISSES):
            p = _PAREN_AFTER_WORD.search(text, at + 1)
            if p is None:
                break
            m = CALL.search(text, max(at, p.end() - 1 - MAX_NAME_CHARS), p.end())
            if m is not None:
                break
            at = p.end()
        else:
            m = CALL.search(text, at)
        s = self._spaced.search(text, pos) if self._spaced is not None else None
        return s if s is not None and (m is None or s.start() < m.start()) else m

    def context(self, start: int) -> tuple[bool, str, bool]:
        """``(structured, description, in a list)`` for a call or object starting at ``start``."""
        line_start = (self.text.rfind("\n", max(self.at, start - PREFIX_CHARS), start) + 1
                      or (self.at if start - self.at <= PREFIX_CHARS else -1))  # (-1: no line start within reach)
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

    # -- collecting -----------------------------------------------------------------------------------------

    def result(self) -> Salvage:
        sites = sorted(self.sites, key=lambda s: s.start)
        loose = [s for s in sites if not s.structured]
        if loose and len(loose) < len(sites):
            self.notes.append(f"{len(loose)} call(s) in prose passed over: the answer holds structured calls")
            sites = [s for s in sites if s.structured]
        for prev, s in zip([None, *sites], sites):  # a group: sites with only separators between them
            same = prev is not None and s.start - prev.end <= MAX_GAP and _GAP.fullmatch(self.text, prev.end, s.start)
            s.group = prev.group if same else (prev.group + 1 if prev else 0)
        seen: dict[str, int] = {}  # call key -> group it was first read in
        for s in sites:
            first = [seen.setdefault(canonical_json([c.name, dict(c.arguments)]), s.group) == s.group for c in s.calls]
            self.notes.extend(f"{c.name} written again (line {s.line}): counted once"
                              for c, f in zip(s.calls, first) if not f)
            s.calls = [c for c, f in zip(s.calls, first) if f]
        kept = [s for s in sites if s.calls]
        calls = [c for s in kept for c in s.calls]
        if len(calls) > MAX_CALLS:
            self.notes.append(f"only the first {MAX_CALLS} calls kept")
            calls = calls[:MAX_CALLS]
        return Salvage(calls, kept, self.notes)


def _ends_in_token(text: str, start: int, tokens: Sequence[str]) -> bool:
    """Whether ``text[start:]`` ends in a prefix of one of ``tokens``: more than its leading blanks, less than all."""
    for t in tokens:
        least = len(t) - len(t.lstrip()) + 1  # (characters of the token the text must end with)
        tail = text[max(start, len(text) - len(t) + 1) :]
        j = tail.find(t[0])
        while 0 <= j <= len(tail) - least:  # (the part from j on has at least ``least`` characters)
            if t.startswith(tail[j:]):
                return True
            j = tail.find(t[0], j + 1)
    return False


def salvage(
    text: str,
    offered: Mapping[str, Sequence[str]] | None = None,
    known: Mapping[str, Lenient] | None = None,
    markers: Mapping[str, int] | None = None,
    tried: Mapping[str, list[ToolCall] | FormatError] | None = None,
    sniffed: Mapping[tuple[str, int], WireFormat] | None = None,
) -> Salvage:
    """The calls of ``text`` read wherever they are. ``offered``: the request's tools, as tool name -> its parameter
    names in declared order (or their specs, by which the formats' lenient readers type values); None without tools.
    What detection already found is reused: ``known`` (lenient readings of the whole text with the same ``offered``)
    and ``tried`` (strict readings: calls or error), by format name; ``markers`` (where each marker first occurs:
    :func:`~refiner.formats.base.marker_positions`); ``sniffed`` (:data:`refiner.formats.detect.Sniffed`)."""
    if not isinstance(text, str):
        return Salvage(notes=[f"not a text: {type(text).__name__}"])
    text = read(text)
    cut = len(text) - reasoning_offset(text) > MAX_LENIENT_CHARS
    if cut:  # (cut where the formats' lenient readers cut it, so their readings in ``known`` are of this text)
        text = read(text[: reasoning_offset(text) + MAX_LENIENT_CHARS])
        if markers is not None:  # (a marker first found within the part kept is found there first)
            markers = {m: i for m, i in markers.items() if i + len(m) <= len(text)}
    scan = _Scan(text, reasoning_offset(text), offered, known, markers, *((None,) * 2 if cut else (tried, sniffed)))
    if cut:
        scan.notes.append(f"only the first {MAX_LENIENT_CHARS} characters after the reasoning were read")
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
