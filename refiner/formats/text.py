"""Text helpers every format shares: the reasoning block before the calls (read by :mod:`refiner.formats.reasoning`), tag spans, whitespace, JSON writing.

No format-specific knowledge here, and nothing that raises: strict reading is :mod:`refiner.formats.strict`, lenient
reading :mod:`refiner.formats.lenient`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from refiner.formats.reasoning import reasoning_offset

__all__ = ["dumps", "find_all_tagged", "find_tagged", "next_bracket", "reasoning_offset", "skip_ws", "strip_reasoning"]


def strip_reasoning(text: str) -> str:
    """The answer after its reasoning block (:mod:`refiner.formats.reasoning`: a block only at the start of the
    answer, closed by a closer that is not inside a call)."""
    return text[reasoning_offset(text) :]


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


_WS = re.compile(r"\s*")


def skip_ws(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m else pos


_ENCODE = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False
).encode  # one encoder: json.dumps with options builds one per call


def dumps(value: Any) -> str:
    """Rendering JSON: compact-ish, readable, unicode kept, key order kept."""
    return _ENCODE(value)


_BRACKET = re.compile(r"[{\[]")


def next_bracket(text: str, pos: int) -> int:
    """The position of the first ``{`` or ``[`` at or after ``pos``, or -1 (one scan, however far the other one is)."""
    m = _BRACKET.search(text, pos)
    return -1 if m is None else m.start()
