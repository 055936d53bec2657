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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from refiner.calls import ToolCall

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

    @property
    def ok(self) -> bool:
        return not self.problems


class WireFormat:
    name: ClassVar[str]
    description: ClassVar[str] = ""
    # Whether call order is part of correctness for this format (rewards use it as the default).
    order_sensitive: ClassVar[bool] = False
    # The tags (or markers) a strictly valid text must contain, for documentation and detection.
    tags: ClassVar[tuple[str, ...]] = ()

    def parse_strict(self, text: str) -> list[ToolCall]:  # pragma: no cover - interface
        raise NotImplementedError

    def parse_lenient(self, text: str) -> Lenient:  # pragma: no cover - interface
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
    """Drops a leading reasoning block: everything up to the last ``</think>`` if there is one."""
    i = text.rfind(_THINK_CLOSE)
    return text[i + len(_THINK_CLOSE) :] if i >= 0 else text


def reasoning_offset(text: str) -> int:
    i = text.rfind(_THINK_CLOSE)
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


def strict_json(fmt: WireFormat, text: str, offset: int = 0) -> Any:
    """``json.loads`` that raises a :class:`FormatError` with the absolute position; NaN/Infinity rejected."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise fmt.error(f"invalid JSON: {e.msg}", offset + e.pos) from None
    except ValueError as e:
        raise fmt.error(str(e), offset) from None
    except RecursionError:
        raise fmt.error("JSON nested too deeply", offset) from None


def lenient_json(text: str) -> Any:
    """Best-effort JSON: strict first, then ``json_repair``. Returns ``None`` when nothing could be recovered.
    Never raises."""
    text = text[:MAX_LENIENT_CHARS]
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        import json_repair

        value = json_repair.loads(text)
    except Exception:  # json_repair is best effort itself; any failure means nothing recovered
        return None
    if value == "" or value is None:
        return None
    return value


def dumps(value: Any) -> str:
    """Rendering JSON: compact-ish, readable, unicode kept, key order kept."""
    return json.dumps(value, ensure_ascii=False)


_WS = re.compile(r"\s*")


def expect_object(fmt: WireFormat, value: Any, what: str, position: int = -1) -> dict:
    if not isinstance(value, dict):
        raise fmt.error(f"{what} must be a JSON object, got {type(value).__name__}", position)
    return value


def expect_str(fmt: WireFormat, value: Any, what: str, position: int = -1) -> str:
    if not isinstance(value, str):
        raise fmt.error(f"{what} must be a string, got {type(value).__name__}", position)
    return value
