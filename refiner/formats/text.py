"""Text helpers every format shares: the reasoning block before the calls, tag spans, whitespace, JSON writing.

No format-specific knowledge here, and nothing that raises: strict reading is :mod:`refiner.formats.strict`, lenient
reading :mod:`refiner.formats.lenient`.
"""

from __future__ import annotations

import json
import re
from typing import Any

_THINK_CLOSE = "</think>"


def strip_reasoning(text: str) -> str:
    """Drops a leading reasoning block: everything up to the first ``</think>`` if there is one.

    The first one, not the last: call text after the reasoning may quote ``</think>`` in a string. (Qwen3 prompts
    can pre-fill ``<think>``, so the closing tag alone marks the end.) A literal ``</think>`` inside the calls of a
    text with no reasoning at all is therefore read as the end of reasoning."""
    return text[reasoning_offset(text) :]


def reasoning_offset(text: str) -> int:
    """Where the answer starts: after the first ``</think>`` (everything before it is the reasoning), else 0. Like
    the chat templates and vLLM's reasoning parsers, it reads the first ``</think>`` as the end of the reasoning even
    when an argument value holds that text; the calls before it are then reasoning, not answer."""
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


def next_bracket(text: str, pos: int) -> int:
    a, b = text.find("{", pos), text.find("[", pos)
    if a < 0:
        return b
    if b < 0:
        return a
    return min(a, b)
