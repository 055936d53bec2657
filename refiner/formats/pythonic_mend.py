"""Mending a call list that lost or doubled one character (lenient reading; pythonic lists here, NESTFUL's JSON
lists in :mod:`refiner.formats.nestful`): edits (punctuation inserted, a doubled closer dropped) near where reading
stops are tried; one counts when the whole rest then reads, and one reading is taken, several settled by the
request's tools (:func:`settle`), else none. Every value read is text the model wrote."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from refiner.calls import value_depth
from refiner.formats.base import MAX_ARGUMENT_DEPTH
from refiner.formats.jsonfix import charge
from refiner.formats.pythonic import fast_call_prefix, read_on, refused
from refiner.formats.pythonic_scan import string_end
from refiner.specs.types import JSON_TYPES, json_type_of

MAX_MEND_WINDOW = 512  # characters around where the fast reader stops in which edits are tried
MAX_MEND_EDITS = 768  # edits tried per list (nearest first)
MAX_MEND_CHARS = 4096  # the longest rest after the plain-layout prefix mended (each edit reads it)
MEND_UNITS_PER_EDIT = 1  # budget units per edit,
MEND_CHARS_PER_UNIT = 64  # and a unit per this many characters an edit reads

_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
VALUE_AFTER = frozenset("=([{,:")  # what a value follows
_VALUE_BEFORE = frozenset(",)]}:")  # what may follow a value
_MEND_WHAT = {"=": "an '=' between a parameter and its value", "(": "the '(' after a tool name", '"': "a quote",
              ",": "a comma", ":": "a ':' in a dict", **{c: f"a {c!r}" for c in "[{)]}"}}


def _mend_edits(src: str, start: int, stop: int, outside: int) -> Iterator[tuple[int, str]]:
    """``(position, char)`` edits worth trying in ``src[start:stop]``: ``char`` inserted before ``position``, or (empty)
    the doubled closer there dropped; a quote where one may open or close a value, other punctuation outside strings
    (read from ``outside``, a position outside any string)."""
    spans, i = [], src.find('"', outside, stop)  # the double-quoted strings, each (open, after close)
    while i >= 0:
        end = string_end(src, i)
        spans.append((i, end if end >= 0 else len(src)))
        i = src.find('"', spans[-1][1], stop)
    k, n = 0, len(src)
    for p in range(start, stop + 1):
        while k < len(spans) and spans[k][1] <= p:
            k += 1
        inside = k < len(spans) and spans[k][0] < p < spans[k][1]
        a = src[p - 1] if p > 0 else ""
        b = src[p] if p < n else ""
        before = src[p - 2] if p > 1 else ""
        value_start = (a in VALUE_AFTER or (a == " " and before in VALUE_AFTER)) and b not in ' \n,)]}'
        value_end = (b in _VALUE_BEFORE or b == "") and a not in " \n([{,:="
        # a quote: opening a value (an empty string's too), or closing one (after an escaped quote too)
        if (value_start or value_end) and (a != '"' or before == "\\") and (b != '"' or a in VALUE_AFTER):
            yield p, '"'
        if inside:
            continue
        if a in _WORD:
            if b in _WORD or b == ")":
                yield p, "("
            if b and (b in _WORD or b in "\"'[{-"):
                yield p, "="
        if value_start and b:
            yield from ((p, c) for c in "[{")
        elif a in VALUE_AFTER and b in "]}":  # an empty list or dict that lost its opener
            yield p, "[" if b == "]" else "{"
        if value_end:
            yield from ((p, c) for c in ")]}")
        elif a in "[{" and b in _VALUE_BEFORE:  # ... or its closer
            yield p, "]" if a == "[" else "}"
        if b == " " and a and a not in " \n,([{:=":
            yield p, ","
            if a == '"':
                yield p, ":"
        elif a in ')]}"' and b and b not in ",)]} \n:":
            yield p, ","
        if b and b in ")]}" and a == b:
            yield p, ""


def value_fits(value: Any, param: Any, depth: int = 0) -> bool:
    """Whether ``value`` has the JSON type ``param`` (a :class:`refiner.specs.Param`) declares, its items too."""
    kind = getattr(param, "type", None)
    if kind not in JSON_TYPES or depth > 8 or value is None:  # (None: the parameter left unset, as pythonic calls write it)
        return True
    got = json_type_of(value)
    if got != kind and (kind, got) != ("number", "integer"):
        return False
    items = getattr(param, "items", None)
    return not (kind == "array" and items is not None and not all(value_fits(v, items, depth + 1) for v in value))


def tools_fit(calls: list[tuple[str, dict[str, Any]]], offered: Mapping[str, Any]) -> tuple[bool, int, bool, int]:
    """How well a reading fits the offered tools: (every name and parameter offered, arguments read, every value of
    its declared type (loosely declared in some specs, so after the count), shallower nesting first)."""
    named, typed, n = True, True, 0
    for name, args in calls:
        n += len(args)
        params = offered.get(name)
        if params is None:
            named = typed = False
            continue
        for key, value in args.items():
            if key not in params:
                named = typed = False
            elif isinstance(params, Mapping) and not value_fits(value, params[key]):
                typed = False
    return named, n, typed, -sum(value_depth(v, 32) for _, args in calls for v in args.values())


def settle(readings: list[Any], offered: Mapping[str, Any] | None) -> Any:
    """The only one of ``readings`` (tuples, calls first), else the only best fit (:func:`tools_fit`), else ``None``."""
    if len(readings) > 1 and offered:
        fits = [(tools_fit(r[0], offered), r) for r in readings]
        best = max(fit for fit, _ in fits)
        readings = [r for fit, r in fits if fit == best] if best[0] else []
    return readings[0] if len(readings) == 1 else None


def mend(
    src: str, edits: Iterable[tuple[int, str]], cost: int,
    read: Callable[[str], tuple[list[tuple[str, dict[str, Any]]], Any] | None], offered: Any,
    names: Mapping[str, str] | None = None,
) -> tuple[list[tuple[str, dict[str, Any]]], Any, str] | None:
    """``(calls, value, what was mended)``: the one reading that ``edits`` of ``src`` give (:func:`settle`), else
    ``None``. Each edit costs ``cost`` budget units and is read by ``read(edited) -> (calls, value) | None``;
    ``names``: what each inserted character is called."""
    readings: dict[str, tuple[list[tuple[str, dict[str, Any]]], Any, int, str]] = {}
    for p, ch in edits:
        if not charge(cost):
            return None
        edited = src[:p] + ch + src[p:] if ch else src[:p] + src[p + 1 :]
        got = read(edited)
        if got is not None:
            key = json.dumps(got[1], sort_keys=True, ensure_ascii=False, default=str)
            readings.setdefault(key, (got[0], got[1], p, ch))
    chosen = settle(list(readings.values()), offered)
    if chosen is None:
        return None
    calls, value, p, ch = chosen
    return calls, value, f"{(names or _MEND_WHAT)[ch]} was missing at {p}" if ch else f"a doubled {src[p]!r} at {p}"


def mend_list(
    src: str, end: int, calls: list[tuple[str, dict[str, Any]]], offered: Any = None
) -> tuple[list[tuple[str, dict[str, Any]]], str] | None:
    """For a list ``src`` whose plain-layout prefix ``calls`` ends at ``end`` and whose rest does not read: ``(every
    call, what was mended)`` by :func:`mend`, else ``None``. A list quoted with single quotes only (no double quote,
    no backslash) is mended with its quotes swapped."""
    if len(src) - end > MAX_MEND_CHARS or not src.startswith("[") or not src.endswith("]") or refused(src):
        return None
    limit = MAX_ARGUMENT_DEPTH + 2  # brackets nesting deeper (quotes not minded): dropped anyway, and each edit
    if src.count("[") + src.count("{") + src.count("(") > limit and max(  # would read the nest again
            itertools.accumulate(1 if b in "[{(" else -1 for b in re.findall(r"[\[\]{}()]", src))) > limit:
        return None
    if "'" in src and '"' not in src and "\\" not in src:
        src = src.replace("'", '"')
        calls, end, _, _ = fast_call_prefix(src)
    at = read_on(src, end, list(calls))[3]
    start, stop = max(end, at - MAX_MEND_WINDOW // 2), min(len(src), at + MAX_MEND_WINDOW // 2)
    edits = sorted(_mend_edits(src, start, stop, end), key=lambda e: abs(e[0] - at))[:MAX_MEND_EDITS]
    cost = MEND_UNITS_PER_EDIT + (len(src) - end) // MEND_CHARS_PER_UNIT

    def read(edited: str) -> tuple[list[tuple[str, dict[str, Any]]], Any] | None:
        got, _, complete, _ = read_on(edited, end, list(calls))
        return (got, got) if complete else None

    mended = mend(src, edits, cost, read, offered)  # (edits nearest to where reading stopped first)
    return None if mended is None else (mended[0], mended[2])
