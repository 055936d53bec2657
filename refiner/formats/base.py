"""What every wire format provides, the registry, and the few text helpers formats share.

A wire format is one small module that subclasses :class:`WireFormat` and registers an instance with
:func:`register`. It provides:

- ``parse_strict(text) -> list[ToolCall]``: raises :class:`FormatError` (message + character position) when a required
  tag is missing or anything inside is not resolvable in that format, checked recursively. Reasoning before the calls
  (``<think>...</think>`` or plain prose) and prose after them are allowed.
- ``parse_lenient(text) -> Lenient``: best effort, never raises, on any string: the calls it recovered and a list of
  problems it met (empty when the text was strictly valid).
- ``render(calls) -> str``: the canonical text; ``parse_strict(render(calls)) == calls``.

This is the only place a format's text is parsed: rewards, data generation, inference and evaluation all go through
the registry (``refiner.formats.get(name)``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from refiner.calls import ToolCall
from refiner.formats.jsonfix import (  # noqa: F401 - re-exported: the formats' lenient JSON
    REPAIR_REGION_CHARS,
    REPAIR_REGION_OPENS,
    REPAIR_TOTAL_COST,
    budget_spent,
    lenient_json,
    repair_budget,
    repair_cost,
    repair_region,
)

# Inputs longer than this are cut before lenient parsing, so a pathological string cannot cost unbounded time.
MAX_LENIENT_CHARS = 200_000


class FormatError(ValueError):
    """Text that is not valid in a wire format. ``position`` is a character offset into the text, or -1."""

    def __init__(self, fmt: str, message: str, position: int = -1) -> None:
        self.fmt = fmt
        self.message = message
        self.position = position
        where = f" at position {position}" if position >= 0 else ""
        super().__init__(f"[{fmt}] {message}{where}")


@dataclass
class Lenient:
    """Result of a best-effort parse: what was recovered, and what could not be."""

    calls: list[ToolCall] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # why the strict parse failed (None when it succeeded, or was not tried: a text over MAX_LENIENT_CHARS)
    strict_error: FormatError | RecursionError | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, item: Any, *, outputs: tuple[str, ...] = ()) -> None:
        """Adds the call :func:`coerce_call` makes of ``item``; a problem instead when it makes none."""
        call = coerce_call(item, self.problems, outputs=outputs)
        if call is not None:
            self.calls.append(call)


class WireFormat:
    name: ClassVar[str]
    description: ClassVar[str] = ""
    # Whether call order is part of correctness for this format (rewards use it as the default).
    order_sensitive: ClassVar[bool] = False
    # The tags (or markers) a strictly valid text must contain, for documentation and detection.
    tags: ClassVar[tuple[str, ...]] = ()

    def parse_strict(self, text: str) -> list[ToolCall]:  # pragma: no cover - interface
        raise NotImplementedError

    def parse_lenient(self, text: str, *, limit: int = MAX_LENIENT_CHARS) -> Lenient:
        """Best effort, never raises. A strictly valid text gives the strict calls and no problems (so ``ok`` tells
        whether the strict parse succeeded); otherwise :meth:`recover` collects what it can from the reasoning and at
        most ``limit`` characters after it, and the strict error is reported when recovery itself met no problem.
        Texts longer than :data:`MAX_LENIENT_CHARS` are not parsed strictly (they count as not valid)."""
        out = Lenient()
        try:
            if len(text) <= MAX_LENIENT_CHARS:
                try:
                    out.calls = self.parse_strict(text)
                    return out
                except (FormatError, RecursionError) as e:
                    out.strict_error = e
            start = reasoning_offset(text)
            limit = min(limit, MAX_LENIENT_CHARS)
            if len(text) - start > limit:
                out.problems.append(f"only the first {limit} characters after the reasoning were read")
                text = text[: start + limit]
            with repair_budget():
                self.recover(text, out)
            if not out.problems:
                out.problems.append(str(out.strict_error or self._strict_error(text)))
        except Exception as e:  # noqa: BLE001 - never raise: anything unexpected becomes a problem
            out.problems.append(f"internal: {e!r}")
        return out

    def _strict_error(self, text: str) -> Exception | str:
        try:
            self.parse_strict(text)
        except (FormatError, RecursionError) as e:
            return e
        return "input was cut"

    def recover(self, text: str, out: Lenient) -> None:  # pragma: no cover - interface
        """Adds the calls recoverable from ``text`` to ``out.calls`` and every defect met to ``out.problems``."""
        raise NotImplementedError

    def render(self, calls: Sequence[ToolCall]) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def is_valid(self, text: str) -> bool:
        try:
            self.parse_strict(text)
        except FormatError:
            return False
        except RecursionError:
            return False
        return True

    def error(self, message: str, position: int = -1) -> FormatError:
        return FormatError(self.name, message, position)

    def __repr__(self) -> str:
        return f"<format {self.name}>"


_REGISTRY: dict[str, WireFormat] = {}


def register(fmt_cls: type[WireFormat]) -> type[WireFormat]:
    """Class decorator: registers one instance of the format under its ``name``."""
    inst = fmt_cls()
    if inst.name in _REGISTRY:
        raise ValueError(f"wire format {inst.name!r} registered twice")
    _REGISTRY[inst.name] = inst
    return fmt_cls


def get(name: str) -> WireFormat:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown wire format {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    return list(_REGISTRY)


def all_formats() -> list[WireFormat]:
    return list(_REGISTRY.values())


# ----------------------------------------------------------------------------------------------------------------
# Shared text helpers (no format-specific knowledge here)

_THINK_CLOSE = "</think>"


def strip_reasoning(text: str) -> str:
    """Drops a leading reasoning block: everything up to the first ``</think>`` if there is one.

    The first one, not the last: call text after the reasoning may quote ``</think>`` in a string. (Qwen3 prompts
    can pre-fill ``<think>``, so the closing tag alone marks the end.) A literal ``</think>`` inside the calls of a
    text with no reasoning at all is therefore read as the end of reasoning."""
    return text[reasoning_offset(text) :]


def reasoning_offset(text: str) -> int:
    i = text.find(_THINK_CLOSE)
    return i + len(_THINK_CLOSE) if i >= 0 else 0


def find_tagged(text: str, open_tag: str, close_tag: str, start: int = 0) -> tuple[int, int] | None:
    """Span (content_start, content_end) of the first ``open_tag ... close_tag`` at or after ``start``; plain
    substring search, linear time."""
    i = text.find(open_tag, start)
    if i < 0:
        return None
    j = text.find(close_tag, i + len(open_tag))
    if j < 0:
        return None
    return i + len(open_tag), j


def find_all_tagged(text: str, open_tag: str, close_tag: str, start: int = 0) -> list[tuple[int, int]]:
    spans = []
    pos = start
    while True:
        span = find_tagged(text, open_tag, close_tag, pos)
        if span is None:
            return spans
        spans.append(span)
        pos = span[1] + len(close_tag)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_WS = re.compile(r"\s*")
_JSON_WS = json.decoder.WHITESPACE  # what json.loads skips around a value (\s would also skip e.g. form feeds)
JSON_DECODER = json.JSONDecoder(parse_constant=_reject_constant)  # strict JSON: NaN and Infinity rejected


def strict_json(fmt: WireFormat, text: str, offset: int = 0) -> Any:
    """``json.loads`` that raises a :class:`FormatError` with the absolute position; NaN/Infinity rejected. (One
    shared decoder: ``json.loads`` with options builds a new decoder per call, a third of the cost of a small value.)"""
    try:
        value, end = JSON_DECODER.raw_decode(text, _JSON_WS.match(text).end())
    except json.JSONDecodeError as e:
        raise fmt.error(f"invalid JSON: {e.msg}", offset + e.pos) from None
    except ValueError as e:
        raise fmt.error(str(e), offset) from None
    except RecursionError:
        raise fmt.error("JSON nested too deeply", offset) from None
    end = _JSON_WS.match(text, end).end()
    if end != len(text):
        raise fmt.error("invalid JSON: Extra data", offset + end)
    return value


def json_object(text: str) -> dict | None:
    """The JSON object ``text`` holds (whitespace around it allowed), or ``None`` when it holds anything else or is
    not strict JSON: :func:`strict_json` for fast paths, which leave explaining a failure to it."""
    try:
        value, end = JSON_DECODER.raw_decode(text, _JSON_WS.match(text).end())
    except (ValueError, RecursionError):
        return None
    if type(value) is not dict or _JSON_WS.match(text, end).end() != len(text):
        return None
    return value


_ENCODE = json.JSONEncoder(ensure_ascii=False).encode  # one encoder: json.dumps with options builds one per call


def dumps(value: Any) -> str:
    """Rendering JSON: compact-ish, readable, unicode kept, key order kept."""
    return _ENCODE(value)


def expect_object(fmt: WireFormat, value: Any, what: str, position: int = -1) -> dict:
    if not isinstance(value, dict):
        raise fmt.error(f"{what} must be a JSON object, got {type(value).__name__}", position)
    return value


def expect_str(fmt: WireFormat, value: Any, what: str, position: int = -1) -> str:
    if not isinstance(value, str):
        raise fmt.error(f"{what} must be a string, got {type(value).__name__}", position)
    return value


def skip_ws(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m else pos


def decode_at(fmt: WireFormat, text: str, pos: int) -> tuple[Any, int]:
    """One strict JSON value starting at ``pos`` (leading whitespace skipped): ``(value, end)``."""
    pos = skip_ws(text, pos)
    try:
        return JSON_DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as e:
        raise fmt.error(f"invalid JSON: {e.msg}", e.pos) from None
    except ValueError as e:
        raise fmt.error(str(e), pos) from None
    except RecursionError:
        raise fmt.error("JSON nested too deeply", pos) from None


def tagged_span(fmt: WireFormat, text: str, open_tag: str, close_tag: str) -> tuple[int, int]:
    """``(a, b)``: ``text[a:b]`` lies between the first ``open_tag`` after any reasoning and the ``close_tag`` after
    it; raises when either tag is missing."""
    start = reasoning_offset(text)
    i = text.find(open_tag, start)
    if i < 0:
        raise fmt.error(f"missing {open_tag}", start)
    a = i + len(open_tag)
    b = text.find(close_tag, a)
    if b < 0:
        raise fmt.error(f"missing {close_tag}", len(text))
    return a, b


def tagged_json(fmt: WireFormat, text: str, open_tag: str, close_tag: str) -> tuple[Any, int]:
    """The single JSON value between the first ``open_tag`` after any reasoning and the ``close_tag`` after it, and
    its position; nothing else is allowed inside the tags. The value is decoded before the closing tag is looked
    for, so a tag quoted inside one of its strings is text."""
    a, _ = tagged_span(fmt, text, open_tag, close_tag)
    value, end = decode_at(fmt, text, a)
    expect_close(fmt, text, end, close_tag)
    return value, skip_ws(text, a)


def expect_close(fmt: WireFormat, text: str, pos: int, close_tag: str) -> int:
    """Raises unless ``close_tag`` follows ``pos`` (whitespace aside); returns the position after it."""
    j = skip_ws(text, pos)
    if text.startswith(close_tag, j):
        return j + len(close_tag)
    if text.find(close_tag, j) < 0:
        raise fmt.error(f"missing {close_tag}", len(text))
    raise fmt.error(f"unexpected text {text[j : j + 30]!r} before {close_tag}", j)


def json_blocks(fmt: WireFormat, text: str, open_tag: str, close_tag: str, *, many: bool = False) -> Iterator[tuple]:
    """``(value, position)`` for the JSON value of each ``open_tag ... close_tag`` block after any reasoning (with
    ``many``: each of the values a block holds in sequence); raises when there is no block, a block holds anything
    else, or a block is not closed. Values are decoded before their closing tag is looked for, so a tag quoted
    inside a string is text. Lazy, so a caller that stops at the first bad value never decodes the rest of a long
    hostile block."""
    start = reasoning_offset(text)
    i = text.find(open_tag, start)
    if i < 0:
        raise fmt.error(f"no {open_tag}...{close_tag} block", start)
    ws, decode = _WS.match, JSON_DECODER.raw_decode
    after_open, after_close = len(open_tag), len(close_tag)
    while i >= 0:
        pos = ws(text, i + after_open).end()
        if text.find(close_tag, pos) < 0:
            raise fmt.error(f"{open_tag} without {close_tag}", i)
        while not (many and text.startswith(close_tag, pos)):  # (with many, a block may be empty)
            try:
                value, end = decode(text, pos)
            except (ValueError, RecursionError):
                decode_at(fmt, text, pos)  # raises the decoder's error as a FormatError
                raise
            yield value, pos
            pos = ws(text, end).end()
            if not many or pos >= len(text):
                break
        if not text.startswith(close_tag, pos):
            expect_close(fmt, text, pos, close_tag)  # raises: text before the closing tag
        i = text.find(open_tag, pos + after_close)


def tagged_list(fmt: WireFormat, text: str, open_tag: str, close_tag: str) -> tuple[list, int]:
    """:func:`tagged_json` for formats whose tags hold a JSON list; raises when the value is anything else."""
    value, pos = tagged_json(fmt, text, open_tag, close_tag)
    if not isinstance(value, list):
        raise fmt.error(f"{open_tag} must hold a JSON list, got {type(value).__name__}", pos)
    return value, pos


MAX_JSON_CANDIDATES = 64


def json_in_prose(fmt: WireFormat, text: str, accept: Any, what: str) -> tuple[Any, int]:
    """The first JSON value after any reasoning that starts at a ``{`` or ``[`` and satisfies ``accept(value)``;
    prose before and after it is allowed. Tries at most :data:`MAX_JSON_CANDIDATES` starting points."""
    pos = reasoning_offset(text)
    first_error: FormatError | None = None
    for _ in range(MAX_JSON_CANDIDATES):
        pos = _next_bracket(text, pos)
        if pos < 0:
            break
        try:
            value, end = decode_at(fmt, text, pos)
        except FormatError as e:
            first_error = first_error or e
            pos += 1
            continue
        if accept(value):
            return value, pos
        pos = end
    if first_error is not None:
        raise first_error
    raise fmt.error(f"no {what} found", reasoning_offset(text))


def _next_bracket(text: str, pos: int) -> int:
    a, b = text.find("{", pos), text.find("[", pos)
    if a < 0:
        return b
    if b < 0:
        return a
    return min(a, b)


# ----------------------------------------------------------------------------------------------------------------
# Lenient helpers


def lenient_region(text: str, open_tag: str, close_tag: str, problems: list[str]) -> str:
    """What lies between ``open_tag`` and ``close_tag`` after any reasoning, tolerating either tag missing (each
    missing tag is reported)."""
    body = strip_reasoning(text)
    i = body.find(open_tag)
    if i < 0:
        problems.append(f"missing {open_tag}")
    else:
        body = body[i + len(open_tag) :]
    j = body.find(close_tag)
    if j < 0:
        problems.append(f"missing {close_tag}")
    else:
        body = body[:j]
    return body


def lenient_list(text: str, open_tag: str, close_tag: str, problems: list[str], what: str) -> list[Any]:
    """The items of the JSON list recovered from between the tags (:func:`lenient_region`); a value that is not a
    list is reported (``what`` names the items) and taken as one item."""
    value = lenient_json_in_prose(lenient_region(text, open_tag, close_tag, problems))
    if not isinstance(value, list):
        problems.append(f"{what} are not a JSON list")
    return as_items(value)


def lenient_blocks(
    text: str, open_tag: str, close_tag: str, problems: list[str], stop: str | None = None
) -> Iterator[str]:
    """The bodies of the ``open_tag ... close_tag`` blocks after any reasoning, one at a time, tolerating missing
    tags (each is reported as its block comes): without any ``open_tag`` the whole text is one block; a block
    without its ``close_tag`` runs to the next ``open_tag``, or to ``stop`` where given."""
    body = strip_reasoning(text)
    chunks = body.split(open_tag)[1:]
    if not chunks:
        problems.append(f"missing {open_tag}")
        chunks = [body]
    for chunk in chunks:
        if close_tag in chunk:
            chunk = chunk.split(close_tag, 1)[0]
        else:
            problems.append(f"missing {close_tag}")
            if stop is not None:
                chunk = chunk.split(stop, 1)[0]
        yield chunk


LENIENT_CANDIDATES = 8


def _holds_objects(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value))


def lenient_json_in_prose(text: str, accept: Any = _holds_objects) -> Any:
    """Best-effort JSON value from text that may hold prose around it: repaired from each of the first
    :data:`LENIENT_CANDIDATES` ``{``/``[`` positions in turn until ``accept(value)`` (by default: an object, or a list
    holding one) holds; else the first value recovered, or ``None``."""
    first = None
    pos = 0
    for _ in range(LENIENT_CANDIDATES):
        pos = _next_bracket(text, pos)
        if pos < 0 or budget_spent():
            break
        value = _whole_value_at(text, pos)
        if value is None:
            value = lenient_json(text[pos:])
        if value is not None and accept(value):
            return value
        if first is None:
            first = value
        pos += 1
    return first


def _whole_value_at(text: str, pos: int) -> Any:
    """The strictly valid JSON value starting at ``pos`` when no other ``{``/``[`` follows it (so repairing the
    rest could not add to it); else ``None``. Linear time."""
    try:
        value, end = JSON_DECODER.raw_decode(text, pos)
    except (ValueError, RecursionError):
        return None
    return value if _next_bracket(text, end) < 0 else None


NAME_KEYS = ("name", "api_name", "tool_name", "function_name", "tool")
ARG_KEYS = ("arguments", "parameters", "input", "args", "params")


def coerce_call(
    item: Any, problems: list[str], *, outputs: tuple[str, ...] = (), step: int | None = None
) -> ToolCall | None:
    """A call from a loosely shaped dict (any of the usual name/argument keys, OpenAI ``function`` nesting,
    arguments as a JSON string); ``None`` (with a problem) when no name can be found."""
    if not isinstance(item, dict):
        problems.append(f"not a call object: {str(item)[:80]!r}")
        return None
    fn = item.get("function")
    if isinstance(fn, dict):
        merged = dict(item)
        merged.update(fn)
        item = merged
    name = next((item[k] for k in NAME_KEYS if isinstance(item.get(k), str) and item[k].strip()), None)
    if name is None and isinstance(fn, str) and fn.strip():
        name = fn
    if name is None:
        problems.append(f"call without a name: {str(item)[:80]!r}")
        return None
    raw = next((item[k] for k in ARG_KEYS if k in item), {})
    if isinstance(raw, str):
        raw = lenient_json(raw) if raw.strip() else {}
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.append(f"arguments of {name!r} are not an object: {str(raw)[:80]!r}")
        raw = {}
    return ToolCall(name, {str(k): v for k, v in raw.items()}, outputs=outputs, step=step)


def as_items(value: Any) -> list[Any]:
    """A JSON value as a list of items: lists as they are, anything else as a one-item list (none for None)."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


_ALLOWED_KEYS: dict[tuple[str, str, tuple[str, ...]], frozenset[str]] = {}
_ABSENT = object()


def strict_fields(
    fmt: WireFormat,
    obj: Any,
    pos: int,
    *,
    what: str,
    index: int | None = None,
    name_key: str = "name",
    args_key: str = "arguments",
    extra_keys: tuple[str, ...] = (),
) -> tuple[str, dict, dict]:
    """Validates one call object: a dict with a string ``name_key``, an object ``args_key`` (missing means
    ``{}``) and no keys beyond those and ``extra_keys``. Returns ``(name, arguments, extras)``. Errors name
    ``what`` (``"what #index"`` when ``index`` is given)."""
    if type(obj) is dict:  # the valid case, checked without building any message
        shape = (name_key, args_key, extra_keys)
        allowed = _ALLOWED_KEYS.get(shape)
        if allowed is None:
            allowed = _ALLOWED_KEYS.setdefault(shape, frozenset((name_key, args_key, *extra_keys)))
        name = obj.get(name_key)
        args = obj.get(args_key, _ABSENT)
        if type(name) is str and (args is _ABSENT or type(args) is dict) and obj.keys() <= allowed and name.strip():
            extras = {k: obj[k] for k in extra_keys if k in obj} if extra_keys else {}
            return name, {} if args is _ABSENT else args, extras
    if index is not None:
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


def plain_calls(
    items: Iterable[Any],
    name_key: str = "name",
    args_key: str = "arguments",
    outputs_key: str | None = None,
    outputs_as: type = list,
) -> list[ToolCall] | None:
    """The calls of ``items`` when every item is a valid call object (what :func:`strict_fields` accepts, with no
    other keys): a non-empty string ``name_key``, an object ``args_key`` (missing means ``{}``), and where
    ``outputs_key`` is given, optionally that key holding a list of strings (``outputs_as=list``) or one string
    (``outputs_as=str``). ``None`` at the first doubt: the format's own loop then finds and explains the error. The
    valid case costs a few dict lookups per call, as every reward of a well-formed output takes it. ``items`` may
    be lazy: nothing after the first doubt is read."""
    trusted = ToolCall.trusted
    calls = []
    for item in items:
        if type(item) is not dict:
            return None
        name = item.get(name_key)
        if type(name) is not str or not name.strip():
            return None
        size = 1
        args = item.get(args_key)
        if type(args) is dict:
            size = 2
        elif args_key in item:
            return None
        else:
            args = {}
        outputs: tuple[str, ...] = ()
        if outputs_key is not None and outputs_key in item:
            size += 1
            out = item[outputs_key]
            if outputs_as is str and type(out) is str:
                outputs = (out,)
            elif outputs_as is list and type(out) is list and all(type(o) is str for o in out):
                outputs = tuple(out)
            else:
                return None
        if len(item) != size:
            return None
        calls.append(trusted(name, args, outputs))
    return calls


def expect_str_list(fmt: WireFormat, value: Any, what: str, position: int = -1) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fmt.error(f"{what} must be a list of strings", position)
    return tuple(value)
