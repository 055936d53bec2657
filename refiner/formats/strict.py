"""Strict reading helpers: JSON that must be exactly right, tags that must be there, call objects that must have the
right keys. Each raises the format's :class:`~refiner.formats.base.FormatError` with a message and a position, and
reads well-formed input through checks that build no message."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import FormatError, WireFormat
from refiner.formats.text import next_bracket, reasoning_offset, skip_ws

JSON_WS = json.decoder.WHITESPACE  # what json.loads skips around a value (\s would also skip e.g. form feeds)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


# strict JSON: NaN, Infinity and numbers too large for a float (``1e999``) rejected
JSON_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
JSON_STARTS = frozenset('{["-0123456789tfn')  # the characters a JSON value may start with


def json_head(text: str, pos: int = 0) -> tuple[Any, int] | None:
    """The JSON value ``text`` holds at ``pos`` and where it ends; None when none starts there."""
    if text[pos : pos + 1] not in JSON_STARTS:  # (told without raising)
        return None
    try:
        return JSON_DECODER.raw_decode(text, pos)
    except (ValueError, RecursionError):
        return None


def strict_json(fmt: WireFormat, text: str, offset: int = 0) -> Any:
    """``json.loads`` with the shared decoder; errors are raised at their position in ``text`` plus ``offset``."""
    value, end = _decoded(fmt, text, JSON_WS.match(text).end(), offset)
    end = JSON_WS.match(text, end).end()
    if end != len(text):
        raise fmt.error("invalid JSON: Extra data", offset + end)
    return value


def first_tag(fmt: WireFormat, text: str, tag: str, missing: str) -> tuple[int, int]:
    """``(start, i)``: where the answer starts after any reasoning and ``tag`` first occurs; else raises ``missing``."""
    start = reasoning_offset(text)
    i = text.find(tag, start)
    if i < 0:
        raise fmt.error(missing, start)
    return start, i


def expect_object(fmt: WireFormat, value: Any, what: str, position: int = -1) -> dict:
    if not isinstance(value, dict):
        raise fmt.error(f"{what} must be a JSON object, got {type(value).__name__}", position)
    return value


def expect_str(fmt: WireFormat, value: Any, what: str, position: int = -1) -> str:
    if not isinstance(value, str):
        raise fmt.error(f"{what} must be a string, got {type(value).__name__}", position)
    return value


def expect_str_list(fmt: WireFormat, value: Any, what: str, position: int = -1) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fmt.error(f"{what} must be a list of strings", position)
    return tuple(value)


def decode_at(fmt: WireFormat, text: str, pos: int) -> tuple[Any, int]:
    """One strict JSON value starting at ``pos`` (leading whitespace skipped): ``(value, end)``."""
    return _decoded(fmt, text, skip_ws(text, pos))


def _decoded(fmt: WireFormat, text: str, pos: int, offset: int = 0) -> tuple[Any, int]:
    """The strict JSON value at ``pos`` and where it ends; errors are raised at their position plus ``offset``."""
    try:
        return JSON_DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as e:
        raise fmt.error(f"invalid JSON: {e.msg}", offset + e.pos) from None
    except ValueError as e:
        raise fmt.error(str(e), offset + pos) from None
    except RecursionError:
        raise fmt.error(_DEEP, offset + pos) from None


def json_blocks(fmt: WireFormat, text: str, open_tag: str, close_tag: str, *, many: bool = False) -> Iterator[tuple]:
    """``(value, position)``, block by block, for the JSON value of each ``open_tag ... close_tag`` block after any
    reasoning (with ``many``: each of the values a block holds); raises when there is no block, a block holds anything
    else, or a block is not closed (before any value of that block is given)."""
    i = first_tag(fmt, text, open_tag, f"no {open_tag}...{close_tag} block")[1]
    after_open, after_close = len(open_tag), len(close_tag)
    while i >= 0:
        pos = skip_ws(text, i + after_open)
        if text.find(close_tag, pos) < 0:
            raise fmt.error(f"{open_tag} without {close_tag}", i)
        values = []
        while not (many and text.startswith(close_tag, pos)):  # (with many, a block may be empty)
            value, end = _decoded(fmt, text, pos)
            values.append((value, pos))
            pos = skip_ws(text, end)
            if not many or pos >= len(text):
                break
        if not text.startswith(close_tag, pos):  # (text before it, or the one found above is inside a value)
            if text.find(close_tag, pos) < 0:
                raise fmt.error(f"missing {close_tag}", len(text))
            raise fmt.error(f"unexpected text {text[pos : pos + 30]!r} before {close_tag}", pos)
        yield from values
        i = text.find(open_tag, pos + after_close)


MAX_JSON_CANDIDATES = 64
# Starting points that nest deeper than Python's JSON decoder may go, before the search gives up.
MAX_DEEP_CANDIDATES = 2
_DEEP = "JSON nested too deeply"


def json_in_prose(fmt: WireFormat, text: str, accept: Any, what: str) -> tuple[Any, int]:
    """The first JSON value after any reasoning that starts at a ``{`` or ``[`` and satisfies ``accept(value)``;
    prose before and after it is allowed. Tries at most :data:`MAX_JSON_CANDIDATES` starting points, of which at most
    :data:`MAX_DEEP_CANDIDATES` nest too deeply."""
    pos = reasoning_offset(text)
    first_error: FormatError | None = None
    deep = 0
    for _ in range(MAX_JSON_CANDIDATES):
        pos = next_bracket(text, pos)
        if pos < 0:
            break
        try:
            value, end = decode_at(fmt, text, pos)
        except FormatError as e:
            first_error = first_error or e
            deep += e.message == _DEEP
            if deep >= MAX_DEEP_CANDIDATES:
                break
            pos += 1
            continue
        if accept(value):
            return value, pos
        pos = end
    if first_error is not None:
        raise first_error
    raise fmt.error(f"no {what} found", reasoning_offset(text))


_ABSENT = object()


def strict_fields(
    fmt: WireFormat,
    obj: Any,
    pos: int,
    *,
    what: str,
    index: int,
    name_key: str = "name",
    args_key: str = "arguments",
    extra_keys: tuple[str, ...] = (),
) -> tuple[str, dict, dict]:
    """Validates one call object: a dict with a string ``name_key``, an object ``args_key`` (missing means ``{}``) and
    no keys beyond those and ``extra_keys``. Returns ``(name, arguments, extras)``. Errors name ``"what #index"``."""
    if type(obj) is dict:  # the valid case, checked without building any message
        name = obj.get(name_key)
        args = obj.get(args_key, _ABSENT)
        if type(name) is str and (args is _ABSENT or type(args) is dict) and name.strip():
            extras = {k: obj[k] for k in extra_keys if k in obj} if extra_keys else {}
            if len(obj) == 1 + (args is not _ABSENT) + len(extras):  # (no key beyond those)
                return name, {} if args is _ABSENT else args, extras
    what = f"{what} #{index}"
    obj = expect_object(fmt, obj, what, pos)
    unknown = set(obj) - {name_key, args_key, *extra_keys}
    if unknown:
        raise fmt.error(f"unexpected keys {sorted(unknown)} in {what}", pos)
    if name_key not in obj:
        raise fmt.error(f"{what} has no {name_key!r}", pos)
    name = expect_str(fmt, obj[name_key], repr(name_key), pos)
    if not name.strip():
        raise fmt.error(f"empty {name_key!r} in {what}", pos)
    args = expect_object(fmt, obj.get(args_key, {}), repr(args_key), pos)
    return name, args, {k: obj[k] for k in extra_keys if k in obj}


def token_sections(fmt: WireFormat, text: str, begin: str, call_begin: str, end: str,
                   read_call: Callable[[str, int], tuple[ToolCall, int]]) -> list[ToolCall]:
    """The calls of every ``begin ... end`` section after the reasoning, each opened by ``call_begin`` and read by
    ``read_call(text, position after call_begin) -> (call, end)``; raises on a missing section or other text in one."""
    i = first_tag(fmt, text, begin, f"no {begin}")[1]
    calls = []
    while i >= 0:
        pos = i + len(begin)
        while True:
            pos = skip_ws(text, pos)
            if text.startswith(end, pos):
                pos += len(end)
                break
            if not text.startswith(call_begin, pos):
                if pos >= len(text):
                    raise fmt.error(f"missing {end}", pos)
                raise fmt.error(f"expected {call_begin} or {end}, got {text[pos : pos + 30]!r}", pos)
            call, pos = read_call(text, pos + len(call_begin))
            calls.append(call)
        i = text.find(begin, pos)
    return calls
