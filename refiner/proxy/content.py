"""Tool calls an upstream left in an answer's ``content``: :class:`Openers` finds where calls may start,
:class:`ContentSplit` says what can be released now and what is held. No call is ever made from released text.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Collection, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from refiner import formats
from refiner.formats.base import marker_table
from refiner.formats.reasoning import Brackets, fenced_tags, format_tags, is_closing_tag, is_markup, skip_blanks
from refiner.specs.catalog import tool_name

MAX_REGION_CHARS = 64_000  # an untagged region longer than this is held to the end unchecked
MAX_CHECKS = 16  # region checks per answer; past that, the rest of the answer is held

_IDENT = r"[A-Za-z_][\w.\\-]*"
_IDENT_RE = re.compile(_IDENT)
_OPEN_LIST_TAIL = re.compile(r"\[\s*(?:" + _IDENT + r")?\s*\Z")


def markers(own: str | None = None) -> tuple[str, ...]:
    """The call markers of every registered format, longest first: its detection markers and closers and its tags
    that are tags or sentinel tokens, and the open literals of a row whose tags are no markup
    (:func:`~refiner.formats.reasoning.fenced_tags`, blanks stripped). ``own``: a format whose detection markers all
    count. Made once per state of the registry (its :func:`~refiner.formats.base.marker_table`)."""
    return _markers(own, marker_table())


@functools.lru_cache(maxsize=16)
def _markers(own: str | None, table: object) -> tuple[str, ...]:  # (``table``: the registry's state)
    found = set(getattr(formats.get(own).detection, "markers", ())) if own else set()
    for f in formats.all_formats():
        marks = getattr(getattr(f, "detection", None), "markers", ()) or ()
        found |= {t for t in format_tags(f) if is_markup(t)}
        found |= {t for t in marks if isinstance(t, str) and len(t) >= 8 and not t.startswith(("'", '"', "{", "["))}
        fenced = fenced_tags(f)
        found |= {o.strip() for o in fenced[0]} if fenced is not None else set()
    return tuple(sorted(found, key=lambda t: (-len(t), t)))


@functools.lru_cache(maxsize=16)
def line_markers(table: object) -> tuple[str, ...]:  # (``table``: the registry's state)
    """What follows the line break of each registered marker that names a line start (Onyx's ``\nto=``)."""
    return tuple(sorted({m[1:] for f in formats.all_formats() for m in getattr(getattr(f, "detection", None),
                                                                            "markers", ()) or ()
                         if isinstance(m, str) and m.startswith("\n") and m[1:].strip()}))


class Openers:
    """Finds where calls may start in a text, for one request's tool names (:attr:`names`, sorted): a marker, a
    bracket or fence at a line start, an offered name called at a line start, or an offered name after a line-start
    marker (:func:`line_markers`; ``to=get_weather``)."""

    def __init__(self, tool_names: Iterable[str] = (), known_markers: Sequence[str] | None = None) -> None:
        self.markers = tuple(known_markers) if known_markers is not None else markers()
        self.names = sorted(n for n in tool_names if isinstance(n, str))
        names = sorted({n for n in self.names if n.strip()}, key=len, reverse=True)
        parts = [f"(?P<marker>{'|'.join(map(re.escape, self.markers))})"] if self.markers else []
        parts += [r"(?P<fence>^[ \t]*```)", r"(?P<list>^[ \t]*\[|\[(?=\s*" + _IDENT + r"\s*\())",
                  r"(?P<object>^[ \t]*\{)"]
        lines = line_markers(marker_table()) if names else ()
        if names:
            parts.append(r"(?P<call>^[ \t]*(?:" + "|".join(map(re.escape, names)) + r")\s*\()")
        if lines:
            parts.append(r"(?P<recipient>^[ \t]*(?:" + "|".join(map(re.escape, lines)) + r")(?:"
                         + "|".join(map(re.escape, names)) + r")(?![\w.-]))")
        self.pattern = re.compile("|".join(parts), re.MULTILINE)
        self.prefixes = {t[:k] for t in self.markers for k in range(1, len(t))}
        self.marker_prefixes = frozenset(self.prefixes)
        self.prefixes |= {f"{n}("[:k] for n in names for k in range(1, len(n) + 1)}
        self.prefixes |= {f"{o}{n}"[:k] for o in lines for n in names for k in range(1, len(o) + len(n) + 1)}
        self.longest = max((len(p) for p in self.prefixes), default=0)

    def find(self, text: str, start: int) -> tuple[int, str] | None:
        """``(position, kind)`` of the first opener at or after ``start`` (a group name of :attr:`pattern`)."""
        m = self.pattern.search(text, start)
        if m is None:
            return None
        kind = m.lastgroup or "marker"
        pos = m.start(kind)
        if kind in ("fence", "list", "object", "call", "recipient"):
            pos += len(m.group(kind)) - len(m.group(kind).lstrip(" \t"))
        return pos, kind

    def begun(self, text: str, start: int, prefixes: Collection[str], before: int) -> int:
        """Where the longest tail of ``text[start:]`` that is in ``prefixes`` (an opener the text so far only begins)
        starts, when it starts before ``before``; else -1."""
        n = len(text)
        for k in range(min(self.longest, n - start), n - before, -1):
            if text[n - k :] in prefixes:
                return n - k
        return -1

    def safe_end(self, text: str, start: int) -> int:
        """How far ``text`` can be released when :meth:`find` found nothing: all but a tail that may begin an opener."""
        end = self.begun(text, start, self.prefixes, len(text))
        end = len(text) if end < 0 else end
        line = text.rfind("\n", 0, end) + 1
        if not text[line:end].strip(" \t`"):
            end = max(start, line)  # a line start that may still become a fence, a list or an object
        m = _OPEN_LIST_TAIL.search(text, start, end)
        if m:
            end = m.start()
        return end


_openers = functools.lru_cache(maxsize=64)(Openers)  # (tool names as a frozenset, markers as a tuple)


def content_split(names: Iterable[str], own: str | None = None) -> ContentSplit:
    """A split of one answer's content that reads calls of the tools ``names`` (``own``: as for :func:`markers`)."""
    return ContentSplit(_openers(frozenset(names), markers(own)))


def _head(text: str, i: int) -> bool | None:
    """Whether the text at ``i`` (a ``[`` or ``{``, or a line inside a fence) can begin calls; None: not known yet."""
    if i >= len(text):
        return None
    c = text[i]
    if c == "{":
        j = skip_blanks(text, i + 1)
        return None if j >= len(text) else text[j] in "\"'"
    if c == "[":
        j = skip_blanks(text, i + 1)
        if j >= len(text):
            return None
        if text[j] in "{\"'[":
            return True
        return _ident_call(text, j)
    if text.startswith("return", i) and i + 6 < len(text) and text[i + 6] in " \t":
        return _head(text, skip_blanks(text, i + 6))
    if "return".startswith(text[i : i + 6]) and i + 6 >= len(text):
        return None
    return _ident_call(text, i)


def _ident_call(text: str, j: int) -> bool | None:
    """An identifier followed by ``(`` at ``j``."""
    m = _IDENT_RE.match(text, j)
    if m is None:
        return False
    k = skip_blanks(text, m.end())
    return None if k >= len(text) else text[k] == "("


@dataclass
class _Region:
    start: int
    kind: str
    looks_like_call: bool = False
    body: int = -1  # fence: where its first line starts
    brackets: Brackets | None = None  # where its brackets close, read on as the text grows


@dataclass
class Step:
    """What :class:`ContentSplit` says: text to ``release`` now, a region to ``check`` (answered by ``verdict``)."""

    release: str = ""
    check: str | None = None


class ContentSplit:
    """Splits one answer's content into released text and held text (see the module docstring)."""

    def __init__(self, openers: Openers) -> None:
        self.openers = openers
        self.text = ""  # the text not yet released or held, after the start of its first line
        self.released = 0  # text[:released] has been released
        self._released_before: list[str] = []  # released text dropped from ``text`` (see :meth:`_compact`)
        self._held_after: list[str] = []  # text that arrived once everything from ``held_from`` on was held
        self.held_from: int | None = None  # text[held_from:] is held to the end
        self.region: _Region | None = None
        self.pending: tuple[int, int] | None = None  # the region being checked
        self.checks = 0
        self.final = False
        self.deadline: float | None = None  # kept for whoever answers the checks (one budget per answer)
        self.held_by: RegionRead | None = None  # the region check that found calls (the text is held from there)

    @property
    def held(self) -> str:
        return self.text[self.held_from :] + "".join(self._held_after) if self.held_from is not None else ""

    @property
    def released_text(self) -> str:
        return "".join(self._released_before) + self.text[: self.released]

    def feed(self, piece: str) -> Step:
        if self.held_from is not None:
            self._held_after.append(piece)  # held to the end: kept as pieces, never re-joined on each delta
            return Step()
        self._compact()
        self.text += piece
        return self._advance()

    def _compact(self) -> None:
        """Drops released text from ``text`` but its last character (which tells whether a search starts a line), so
        that a long stream costs linear time."""
        if self.region is not None or self.pending is not None or self.released < 4096:
            return
        cut = self.released - 1
        self._released_before.append(self.text[:cut])
        self.text = self.text[cut:]
        self.released = 1

    def end(self) -> Step:
        """No more text: a region still open is held; the rest is released."""
        self.final = True
        return self._advance()

    def verdict(self, is_calls: bool, read: RegionRead | None = None) -> Step:
        """The answer to the last :class:`Step`'s ``check`` (``read``: the check's, kept when it holds the text)."""
        start, end = self.pending
        self.pending = self.region = None
        self.checks += 1
        if is_calls:
            self.held_from, self.held_by = start, read
            return Step()
        out = self.text[self.released : end]
        self.released = end
        step = self._advance()
        return Step(out + step.release, step.check)

    def detection(self) -> Any:
        """The held text's detection by the region check that held it, while the held text is that region; else None."""
        read = self.held_by
        return read.detected if read is not None and read.text == self.held else None

    def give_up_checks(self) -> None:
        """Checks are no longer possible (the answer's time budget is spent): release what is not held yet."""
        self.checks = MAX_CHECKS + 1

    def _advance(self) -> Step:
        out: list[str] = []
        while self.held_from is None and self.pending is None:
            if self.region is None:
                found = None if self.checks > MAX_CHECKS else self.openers.find(self.text, self.released)
                if found is None:
                    end = len(self.text) if self.final else self.openers.safe_end(self.text, self.released)
                    out.append(self.text[self.released : end])
                    self.released = max(self.released, end)
                    break
                pos, kind = found
                # an opener inside a marker still being written (``**Tool Call:**\n```json``): wait for the rest
                begun = -1 if kind == "recipient" or self.final else self.openers.begun(
                    self.text, self.released, self.openers.marker_prefixes, pos)
                if begun >= 0:
                    out.append(self.text[self.released : begun])
                    self.released = begun
                    break
                out.append(self.text[self.released : pos])
                self.released = pos
                if kind in ("marker", "recipient") or self.checks >= MAX_CHECKS:
                    self.held_from = pos
                    break
                self.region = _Region(pos, kind, looks_like_call=kind == "call", brackets=Brackets(pos))
            state = self._region_state(self.region)
            if state == "marker":  # the region's opener turned out to begin a format's marker ("[TOOL_CALLS]")
                self.held_from, self.region = self.region.start, None
                break
            if state == "open":
                if self.final or len(self.text) - self.region.start > MAX_REGION_CHARS:
                    self.held_from, self.region = self.region.start, None
                break
            if state == "not_call":
                start = self.region.start
                self.region = None
                out.append(self.text[start : start + 1])  # step past the opener, and look further
                self.released = start + 1
                continue
            self.pending = (self.region.start, state)
            return Step("".join(out), self.text[self.region.start : state])
        return Step("".join(out))

    def _region_state(self, r: _Region) -> str | int:
        """``"open"`` (more text needed), ``"not_call"``, ``"marker"`` (a marker starts there), or the end of a closed
        region that looks like calls."""
        text = self.text
        if any(text.startswith(m, r.start) for m in self.openers.markers):
            return "marker"
        if not self.final and text[r.start :] in self.openers.prefixes:
            return "open"
        if r.kind == "fence" and r.body < 0:
            nl = text.find("\n", r.start + 3)
            if nl < 0:
                return "not_call" if self.final else "open"
            r.body = nl + 1
        if not r.looks_like_call:
            at = r.start
            if r.kind == "fence":
                at = skip_blanks(text, r.body)  # the first non-blank line inside the fence
                if at >= len(text):
                    return "not_call" if self.final else "open"
                if text.startswith("```", at):
                    return "not_call"
                if any(text.startswith(m, at) for m in self.openers.markers):
                    r.looks_like_call = True
            if not r.looks_like_call:
                head = _head(text, at)
                if head is None:
                    return "not_call" if self.final else "open"
                if not head:
                    return "not_call"
                r.looks_like_call = True
        if r.kind == "fence":
            close = text.find("```", r.body)
            return "open" if close < 0 else close + 3
        end = r.brackets.end(text)
        if r.kind == "call" and end >= 0:
            return self._bare_call_end(end)
        return end if end >= 0 else "open"

    def _bare_call_end(self, end: int) -> str | int:
        """A bare call (``name(...)`` at a line start) counts only when nothing but more calls follows on its line."""
        nl = self.text.find("\n", end)
        if nl < 0 and not self.final:
            return "open"
        rest = self.text[end : nl if nl >= 0 else len(self.text)].lstrip(" \t;,")
        if not rest or _ident_call(rest, 0):
            return end
        return "not_call"


MAX_EARLY_READS = 32  # early reads of an answer's calls (held content, or the upstream's tool calls) before its end
CALL_WORDS = ("call", "invoke", "func", "action", "tool")
SENT_STAGES = ("unchanged", "repaired")  # the stages of tier-1 results whose calls may be sent before the end


@dataclass(frozen=True)
class Ask:
    """A question the driver needs answered (:func:`refiner.proxy.work.answer`): ``region``, does ``text`` hold calls
    (a :class:`RegionRead`; None: no more checks)? ``calls``: tier 1's :class:`EarlyRead` of the held ``text``."""

    kind: str
    text: str


@dataclass
class RegionRead:
    """The answer to an ``Ask("region")``: whether ``text`` holds calls, and then its detection
    (:class:`refiner.formats.reading.Detected`), which the read of the held text takes while that is still ``text``."""

    text: str
    calls: bool
    detected: Any = None


@dataclass
class EarlyRead:
    """Tier 1's read of an answer's text before the answer ended (an ``Ask("calls")``, or the upstream's first complete
    tool calls). ``calls``: those to send now (None: none); ``outcome``: :func:`refiner.proxy.work.tier1`'s (None: it
    gave none), which the answer's end takes while its text is still ``text``; ``slow``: the read took longer than a
    choice sent to the model may."""

    text: str
    calls: list[dict] | None
    outcome: dict | None = None
    slow: bool = False

    def covers(self, text: str) -> bool:
        """Whether the answer's end, its text ``text``, takes this read's outcome (tier 1 gave one, of that text)."""
        return self.outcome is not None and self.text == text


class CallDriver:
    """Drives one answer's :class:`ContentSplit` for the proxy, its workers and the vLLM plugin: :meth:`feed` and
    :meth:`end` yield :class:`Ask` questions, are sent the answers and return the text to release (and, from
    :meth:`feed`, the calls read since the last piece); with ``early``, calls are read as the markers that end a call
    or a call section arrive (``</tool_call>``, not ``</parameter>``; up to :data:`MAX_EARLY_READS` reads)."""

    def __init__(self, split: ContentSplit, early: bool = True) -> None:
        self.split = split
        closers = (t for t in split.openers.markers if is_closing_tag(t) and any(w in t.lower() for w in CALL_WORDS)
                   and not any(w in t.lower() for w in ("param", "arg")))
        self.closers = tuple(closers) if early else ()
        self.early = bool(self.closers)
        self.longest = max((len(c) for c in self.closers), default=0)
        self.held_len = 0  # characters of the held text seen
        self.tail = ""  # the last characters of the held text, where a closer may have begun
        self.boundary = 0  # the held text up to here was read for calls
        self.calls: list[dict] = []  # calls read early, in order
        self.reads = 0
        self.last: EarlyRead | None = None  # the last early read

    def feed(self, piece: str) -> Generator[Ask, Any, tuple[str, list[dict]]]:
        was_held = self.split.held_from is not None
        release = yield from self._drive(self.split.feed(piece))
        return release, (yield from self._grow(piece if was_held else None))

    def end(self) -> Generator[Ask, Any, str]:
        return (yield from self._drive(self.split.end()))

    def _drive(self, step: Step) -> Generator[Ask, Any, str]:
        out = [step.release]
        while step.check is not None:
            answer = yield Ask("region", step.check)
            if answer is None:
                self.split.give_up_checks()
            step = self.split.verdict(answer is not None and answer.calls, answer)
            out.append(step.release)
        return "".join(out)

    def _grow(self, piece: str | None) -> Generator[Ask, Any, list[dict]]:
        """Records what the held text gained; reads it up to the last call closer that came with it."""
        if self.split.held_from is None or not self.early:
            return []
        piece = self.split.held if piece is None else piece  # (None: the text is held from this piece on)
        start = self.held_len - len(self.tail)
        window = self.tail + piece
        self.held_len += len(piece)
        self.tail = window[-(self.longest - 1) :] if self.longest > 1 else ""
        end = max((j + len(c) for c in self.closers if (j := window.rfind(c)) >= 0), default=-1)
        if end < 0 or start + end <= self.boundary:
            return []
        self.boundary = start + end
        self.reads += 1
        self.early = self.reads < MAX_EARLY_READS
        read = yield Ask("calls", self.split.held[: self.boundary])
        self.last = read
        calls = read.calls if read is not None else None
        if not calls or len(calls) <= len(self.calls):
            return []
        if not begins_with(calls, self.calls):
            self.early = False  # a later read disagrees with what was sent: the rest waits for the end
            return []
        new = list(calls[len(self.calls) :])
        self.calls += new
        return new


def same_call(call: dict) -> tuple[str, str]:
    """A call's name and arguments (a call, or an OpenAI tool call), as two reads of it must agree."""
    fn = call.get("function") if isinstance(call.get("function"), dict) else call
    args = fn.get("arguments")
    return str(fn.get("name")), args if isinstance(args, str) else json.dumps(args, sort_keys=True, ensure_ascii=False)


def begins_with(calls: Sequence[dict], sent: Sequence[dict]) -> bool:
    """Whether ``calls`` (read whole) begin with the calls ``sent`` before the end."""
    return [same_call(c) for c in calls[: len(sent)]] == [same_call(c) for c in sent]


def complete_calls(result: dict | None, names: set[str]) -> list[dict] | None:
    """The calls of a tier-1 result that can be sent before the answer ends (read or repaired, not cut); else None."""
    sendable = holds_calls(result, names) and result.get("stage") in SENT_STAGES and not result.get("cut")
    return list(result["calls"]) if sendable else None


def split_whole(split: ContentSplit, text: str) -> Generator[Ask, Any, str]:
    """A whole answer's ``text`` through ``split``; its value is the text released."""
    driver = CallDriver(split, early=False)
    first, _ = yield from driver.feed(text)
    return first + (yield from driver.end())


def run_sync(gen: Generator[Ask, Any, Any], answer: Callable[[Ask], Any]) -> Any:
    """Runs a :class:`CallDriver` generator (or :func:`split_whole`), each question answered by ``answer``."""
    try:
        ask = next(gen)
        while True:
            ask = gen.send(answer(ask))
    except StopIteration as stop:
        return stop.value


class ContentCalls:
    """The proxy's setting: ``"auto"`` (calls in any registered format), a list of format names, or off (``None``,
    ``False``, ``()``, ``"off"``)."""

    def __init__(self, setting: str | bool | Sequence[str] | None) -> None:
        if setting in (None, False, "off", "none", ()) or (isinstance(setting, Sequence) and not setting):
            self.enabled, self.allowed = False, None
        elif setting in (True, "auto", "all"):
            self.enabled, self.allowed = True, None
        else:
            names = (setting,) if isinstance(setting, str) else tuple(setting)
            for name in names:
                formats.get(name)  # unknown names fail at start-up
            self.enabled, self.allowed = True, names

    def applies(self, body: dict) -> frozenset[str]:
        """The request's tool names when its answers are read for calls (it offers tools, allows calls and asks for no
        JSON), else none."""
        fmt = body.get("response_format")
        if not self.enabled or body.get("tool_choice") == "none" or (
                isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")):
            return frozenset()
        return frozenset(tool_names(body.get("tools")))

    def describe(self) -> str:
        return "off" if not self.enabled else ("auto" if self.allowed is None else ",".join(self.allowed))


def tool_names(tools: Any) -> set[str]:
    """The names of a request's tools, as the tool specs are read (:func:`refiner.specs.catalog.tool_name`)."""
    return {name for t in tools or [] if (name := tool_name(t)) is not None}


def holds_calls(result: dict | None, names: set[str]) -> bool:
    """Whether a result read from content holds calls: at least one, each naming an offered tool."""
    if not result or result.get("stage") == "error":
        return False
    calls = result.get("calls") or []
    return bool(calls) and all(isinstance(c, dict) and c.get("name") in names for c in calls)
