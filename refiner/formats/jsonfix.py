"""Best-effort JSON for lenient parsing: strict first, then a text cut short closed (:func:`_complete`), then
json_repair on a bounded region (:func:`_region`). Work is bounded by counts, never by time. One ``parse_lenient``
(:class:`repair_budget`) spends at most :data:`REPAIR_TOTAL_COST` units (about a character of json_repair's work);
json_repair gets a region of at most :data:`REPAIR_REGION_CHARS` characters, fewer than :data:`REPAIR_REGION_OPENS`
openers and an estimated cost of :data:`REPAIR_REGION_COST`. The containers a cut at the end of the text left open are
remembered (:func:`open_at_cut`), so the call the text stops in is marked cut."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

REPAIR_REGION_CHARS = 4096
REPAIR_REGION_OPENS = 64  # openers ('{', '[', '(') a repaired region holds at most
REPAIR_REGION_COST = 4096  # units one json_repair call may cost (_region's estimate)
REPAIR_TOTAL_COST = 8192  # units one parse_lenient may spend
REPAIR_CALL_COST = 64  # a json_repair call's fixed cost
COMPLETE_TOKENS_PER_COST = 8  # a completion costs a unit per this many structural characters,
COMPLETE_CHARS_PER_COST = 2048  # a unit per this many characters
COMPLETE_CALL_COST = 32  # and this fixed cost
MAX_RECOVERED_ITEMS = 512  # items (blocks, values, list items, lines) one parse_lenient reads at most
CUT_TAIL_CHARS = 256  # characters of a completed input's end compared with the parsed text's end

_state = threading.local()


@dataclass(slots=True, eq=False)
class _Parse:
    """One ``parse_lenient``'s counters and the containers a cut at the end of its text left open."""

    total: int
    tail: str | None  # the end of the parsed text (:func:`_tail`)
    used: int = 0
    items: int = MAX_RECOVERED_ITEMS
    gave_up: bool = False  # the item count ran out: the rest of the text was not read
    # id -> (container, its last member's state, the completion)
    open: dict[int, tuple[Any, str, Completion]] = field(default_factory=dict)
    cuts: list[Completion] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class Completion:
    """A value closed at the end of the parsed text; ``clean``: only closing brackets were missing."""

    clean: bool


def _tail(text: str) -> str:
    return text.rstrip()[-CUT_TAIL_CHARS:]


class repair_budget:
    """A ``parse_lenient``'s budget (``total`` units) and cut record for ``text``; nested, the outer budget is used."""

    def __init__(self, text: str | None = None, total: int = REPAIR_TOTAL_COST) -> None:
        self.text = text
        self.total = total

    def __enter__(self) -> _Parse:
        self.outer = getattr(_state, "parse", None)
        self.saved: tuple[Any, ...] | None = None
        if self.outer is None:
            _state.parse = _Parse(self.total, _tail(self.text) if isinstance(self.text, str) else None)
        elif isinstance(self.text, str):  # another text inside the budget: the cut record is this text's
            p = self.outer
            self.saved = (p.tail, p.open, p.cuts)
            p.tail, p.open, p.cuts = _tail(self.text), {}, []
        return _state.parse

    def __exit__(self, *exc: object) -> None:
        if self.outer is None:
            _state.parse = None
        elif self.saved is not None:  # the outer record again, with this text's cuts when both end alike
            p = self.outer
            tail, opened, cuts = self.saved
            if tail is None or tail == p.tail:
                opened.update(p.open)
                cuts.extend(p.cuts)
            p.tail, p.open, p.cuts = tail, opened, cuts


def budget_spent() -> bool:
    """Whether the current ``parse_lenient`` has spent its repair budget (recovery loops stop early then)."""
    parse = getattr(_state, "parse", None)
    return parse is not None and parse.used >= parse.total


def take_items(n: int) -> int:
    """How many of ``n`` further items the current ``parse_lenient`` may still read, counted as read."""
    parse = getattr(_state, "parse", None)
    if parse is None:
        return n
    k = min(n, max(parse.items, 0))
    parse.items -= k
    parse.gave_up |= k < n
    return k


def give_up() -> None:
    """Records that the current ``parse_lenient`` left part of the text unread."""
    parse = getattr(_state, "parse", None)
    if parse is not None:
        parse.gave_up = True


def charge(units: int) -> bool:
    """Spends ``units`` of the current ``parse_lenient``'s budget; False (nothing spent) once it is spent."""
    parse = getattr(_state, "parse", None)
    if parse is None:
        return True
    if parse.used >= parse.total:
        return False
    parse.used += units
    return True


def open_at_cut(container: Any) -> tuple[str, Completion] | None:
    """For a list or dict a cut at the end of the parsed text left open: ``(its last member's state: "cut", "number"
    or "complete", the completion)``; else ``None``."""
    parse = getattr(_state, "parse", None)
    hit = parse.open.get(id(container)) if parse is not None and parse.open else None
    return (hit[1], hit[2]) if hit is not None and hit[0] is container else None


_BRACKETS = re.compile(r"[{}\[\]()]")
_MATCHES = {"}": "{", "]": "[", ")": "("}


def _region(text: str) -> tuple[str, int]:
    """``(region, estimated cost)``: the bounded prefix of ``text`` that :func:`lenient_json` hands to json_repair
    (see the module docstring). One pass over the brackets; the estimate of ``text[:p]`` is its length, the spans of
    the openers closed in it and those of the openers still open, up to ``p``."""
    text = text[:REPAIR_REGION_CHARS]
    cap = REPAIR_REGION_COST - REPAIR_CALL_COST
    stack: list[tuple[str, int]] = []
    closed = open_sum = opens = last = 0  # spans closed, positions of the openers still open (summed), the last bracket
    for p in [m.start() for m in _BRACKETS.finditer(text)] + [len(text)]:
        depth = len(stack)
        cost = p + closed + depth * p - open_sum
        if cost > cap:  # cut where the estimate reaches the cap: past the last bracket, 1 + depth a character
            end = last + max(cap - (last + closed + depth * last - open_sum), 0) // (1 + depth)
            return text[:end], end + closed + depth * end - open_sum + REPAIR_CALL_COST
        if p == len(text):
            return text, cost + REPAIR_CALL_COST
        c = text[p]
        if c in "{[(":
            opens += 1
            if opens >= REPAIR_REGION_OPENS:
                return text[:p], cost + REPAIR_CALL_COST
            stack.append((c, p))
            open_sum += p
        elif stack and stack[-1][0] == _MATCHES[c]:
            q = stack.pop()[1]
            open_sum -= q
            closed += p - q
        last = p


def complete_cost(text: str) -> int:
    """What :func:`complete_cut` on ``text`` costs against REPAIR_TOTAL_COST."""
    tokens = sum(map(text.count, '{}[],"'))
    return tokens // COMPLETE_TOKENS_PER_COST + len(text) // COMPLETE_CHARS_PER_COST + COMPLETE_CALL_COST


# What json_repair starts a value at (a bracket, a comment, a quote); a text without them it reads as the decoder does.
_REPAIR_STARTS = re.compile("[{\\[(#/\"'\u201c\u201d]")

# json_repair keeps the escapes \f and \/ as two characters: spelt \u000c and / first (backslash pairs first).
_ESCAPES_JSON_REPAIR_MISSES = re.compile(r"\\[\\f/]")
_SPELT = {"\\\\": "\\\\", "\\f": "\\u000c", "\\/": "/"}


def lenient_json(text: str, *, at_end: bool | None = None) -> Any:
    """Best-effort JSON value of ``text``, or ``None``; never raises. ``at_end``: whether ``text`` ends the parsed text
    (default: :func:`ends_text`)."""
    try:
        return finite(json.loads(text))
    except json.JSONDecodeError as e:
        if budget_spent():  # (mending, completing and json_repair each need some of it)
            return None
        mended, text, e = _mended(text, e, closed=not (ends_text(text) if at_end is None else at_end))
        if mended is not None:
            return finite(mended)
        if ran_off_the_end(text, e) and charge(complete_cost(text)):
            done = _complete(text)
            if done is not None:
                value = finite(done[0])
                if ends_text(text) if at_end is None else at_end:
                    _remember_cut(value, *done[1:])
                return value
    except (ValueError, RecursionError):
        pass
    if budget_spent():
        return None
    region, cost = _region(_ESCAPES_JSON_REPAIR_MISSES.sub(lambda m: _SPELT[m.group()], text[:REPAIR_REGION_CHARS]))
    if not region.strip() or not charge(cost):
        return None
    try:
        if _REPAIR_STARTS.search(region) is None:  # (json_repair would read it as the decoder does, or read nothing)
            value = json.loads(region)
        else:
            import json_repair

            value = json_repair.loads(region)
    except Exception:  # noqa: BLE001 - json_repair is best effort itself; any failure means nothing recovered
        return None
    return None if value == "" or value is None else finite(value)


MAX_MENDS = 3  # lost quotes or colons put back where the decoder's error shows them
_KEY_COLON = re.compile(r'([^":\\\n]{1,64}):[ \t]')  # a key whose closing quote was lost, then its ':'
_VALUE_START = re.compile(r'["\[{\-0-9]|true\b|false\b|null\b')
_BARE_TEXT = re.compile(r'[^\s"{}\[\],:0-9\-][^"{}\[\]\n]{0,256}"')  # a string whose opening quote was lost
_STRING_BEFORE = re.compile(r'"\s*\Z')
_CLOSERS_AT_END = re.compile(r"[\]}][\s\]}]*\Z")


def _mended(text: str, e: json.JSONDecodeError, closed: bool = False) -> tuple[Any, str, json.JSONDecodeError]:
    """``(value, text, error)``: the value of ``text`` once up to :data:`MAX_MENDS` quotes or colons its decoding
    errors point at are put back (``{"a: 1}``, ``{"a" 1}``, ``{a": 1}``; with ``closed``, ``{"a": "x}``), else
    ``None``. When the mends made end the value before text that follows it (``{"a: 1}</tag>``), that text with them
    and its error (the value is read from it as from any value followed by text); else ``text`` and ``e``."""
    given, first = text, e
    for _ in range(MAX_MENDS):
        fix = _mend_at(text, e, closed)
        if fix is None or not charge(complete_cost(text)):
            break
        at, char = fix
        text = text[:at] + char + text[at:]
        try:
            return json.loads(text), text, e
        except json.JSONDecodeError as again:
            e = again
        except (ValueError, RecursionError):
            break
    if text is not given and e.msg.startswith("Extra data"):
        return None, text, e
    return None, given, first


def _mend_at(text: str, e: json.JSONDecodeError, closed: bool) -> tuple[int, str] | None:
    """``(where, character)`` to put back for the decoding error ``e``, or ``None``."""
    msg, pos = e.msg, e.pos
    if msg.startswith("Unterminated string"):  # pos: the opening quote
        before = _before(text, pos)
        if before in ("{", ","):
            m = _KEY_COLON.match(text, pos + 1)
            if m is not None:
                return m.end(1), '"'
        if closed and before in (":", "[", ","):
            m = _CLOSERS_AT_END.search(text, pos + 1)
            if m is not None and m.start() > pos + 1:
                return m.start(), '"'
        return None
    if msg.startswith("Expecting ':' delimiter"):
        close = text.rfind('"', 0, pos)
        start = text.rfind('"', 0, close) if close > 0 else -1
        if start < 0 or _before(text, start) not in ("{", ","):
            return None
        m = _KEY_COLON.match(text, start + 1, close + 1)
        if m is not None:
            return m.end(1), '"'
        if _STRING_BEFORE.search(text, 0, pos) and _VALUE_START.match(text, pos):
            return close + 1, ":"
        return None
    if msg.startswith("Expecting ',' delimiter"):
        close = text.rfind('"', 0, pos)
        if close < 0 or text[close + 1 : pos].strip():  # (the decoder did not stop right after a string)
            return None
        start = text.rfind('"', 0, close)
        comma = text.rfind(",", start + 1, close)
        swallowed = start >= 0 and comma > start and not text[comma + 1 : close].strip()
        if swallowed and _before(text, start) in (":", "[", ","):  # (a value: after ':', or an item of a list)
            return comma, '"'
        return None
    key = msg.startswith("Expecting property name enclosed in double quotes")
    if (key or (msg.startswith("Expecting value") and _before(text, pos) in (":", "[", ","))) and (
        _BARE_TEXT.match(text, pos) and not _VALUE_START.match(text, pos)
    ):
        return pos, '"'
    return None


def _before(text: str, pos: int) -> str:
    return text[max(0, pos - 64) : pos].rstrip()[-1:]


def written_whole(text: str) -> dict[str, Any]:
    """The members of a JSON object text cut short that were written whole (``{}`` when there are none)."""
    done = _complete(text) if charge(complete_cost(text)) else None
    if done is None or type(done[0]) is not dict:
        return {}
    value, depth, last, _ = done
    out = {str(k): v for k, v in finite(value).items()}
    if depth >= 1 and out and (depth > 1 or last != "complete"):
        out.pop(next(reversed(out)))
    return out


def ends_text(text: str) -> bool:
    """Whether ``text`` ends where the text being parsed ends (their last characters agree)."""
    parse = getattr(_state, "parse", None)
    if parse is None or parse.tail is None:
        return False
    tail = _tail(text)
    return bool(tail) and parse.tail.endswith(tail)


def _remember_cut(value: Any, depth: int, last: str, clean: bool) -> None:
    """Records the containers a completion at the end of the parsed text left open."""
    parse = getattr(_state, "parse", None)
    if parse is None:
        return
    done = Completion(clean)
    parse.cuts.append(done)
    node = value
    for level in range(depth):
        if type(node) is dict:
            child = next(reversed(node.values()), None) if node else None
        elif type(node) is list:
            child = node[-1] if node else None
        else:
            break
        parse.open[id(node)] = (node, last if level == depth - 1 else "cut", done)
        node = child


_NON_FINITE_TEXT = {float("inf"): "Infinity", float("-inf"): "-Infinity"}
FINITE_MAX_NODES = 100_000  # values visited by finite(); deeper or larger values are returned as they are


def finite(value: Any) -> Any:
    """``value`` with every float JSON cannot hold replaced by its text (``"Infinity"``, ``"NaN"``); the same object
    when there is none among its first :data:`FINITE_MAX_NODES` nodes."""
    stack, seen = [value], 0
    while stack and seen < FINITE_MAX_NODES:
        v = stack.pop()
        seen += 1
        if type(v) is float:
            if v != v or v in _NON_FINITE_TEXT:
                return _replace_non_finite(value)
        elif type(v) is dict:
            stack.extend(v.values())
        elif type(v) is list:
            stack.extend(v)
    return value


def _replace_non_finite(value: Any, depth: int = 0) -> Any:
    if type(value) is float and (value != value or value in _NON_FINITE_TEXT):
        return "NaN" if value != value else _NON_FINITE_TEXT[value]
    if depth > 64:
        return value
    if type(value) is dict:
        return {k: _replace_non_finite(v, depth + 1) for k, v in value.items()}
    if type(value) is list:
        return [_replace_non_finite(v, depth + 1) for v in value]
    return value


def ran_off_the_end(text: str, e: json.JSONDecodeError) -> bool:
    """Whether the decoder failed because the text ended."""
    if e.msg.startswith("Unterminated string"):
        return True
    if e.msg.startswith("Invalid \\uXXXX escape"):  # cut inside a \u escape
        return CUT_ESCAPE.fullmatch(text, e.pos) is not None
    if not e.msg.startswith("Expecting"):
        return False
    rest = text[e.pos : len(text.rstrip(" \t\n\r"))]  # (a regex search for trailing space is quadratic on space runs)
    return not rest or rest in _CUT_VALUE_STARTS or _CUT_NUMBER_TAIL.fullmatch(rest) is not None


# Where the decoder stops in a value cut short: inside a literal ("tru", "-"), or in a number's fraction or exponent.
_CUT_VALUE_STARTS = frozenset(w[:i] for w in ("true", "false", "null", "-") for i in range(1, len(w) + 1))
_CUT_NUMBER_TAIL = re.compile(r"\.|[eE][+-]?")
CUT_ESCAPE = re.compile(r"u[0-9a-fA-F]{0,4}")  # a \u escape cut short (the decoder refuses a whole one at the end)


# Strings (closed or running to the end: group 1 is the closing quote) and the structural characters.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(")?|[\[\]{},:]')
_CLOSER = {"[": "]", "{": "}"}


_NUMBER_END = frozenset("0123456789")


def _complete(text: str) -> tuple[Any, int, str, bool] | None:
    """For a valid JSON prefix: ``(its value, the open string and brackets closed, else its last member dropped; open
    containers; the innermost one's last member's state; whether it ends on a complete value)``, else ``None``."""
    stack: list[str] = []
    last_cut = -1  # position just before the last ',' or just after the last '[' / '{' (outside strings)
    cut_depth = 0  # brackets open at last_cut
    open_string = False
    for m in _TOKENS.finditer(text):
        c = text[m.start()]
        if c == '"':
            open_string = m.group(1) is None
        elif c == "{" or c == "[":
            stack.append(_CLOSER[c])
            last_cut, cut_depth = m.end(), len(stack)
        elif c == "}" or c == "]":
            if not stack or stack.pop() != c:
                return None
        elif c == ",":
            last_cut, cut_depth = m.start(), len(stack)
    end = text.rstrip()[-1:]
    try:
        value = json.loads(text + ('"' if open_string else "") + "".join(reversed(stack)))
    except (ValueError, RecursionError):
        pass
    else:
        if open_string:
            return value, len(stack), "cut", False
        if end in _NUMBER_END:  # whole, or cut after some of its digits: no telling
            return value, len(stack), "number", False
        return value, len(stack), "complete", end not in ("[", "{")
    if last_cut >= 0:
        try:
            value = json.loads(text[:last_cut] + "".join(reversed(stack[:cut_depth])))
        except (ValueError, RecursionError):
            return None
        return value, cut_depth, "complete", False
    return None
