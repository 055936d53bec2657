"""Text helpers every format shares: the answer after its reasoning block (:mod:`refiner.formats.reasoning`), tag
spans, whitespace, JSON writing. No format-specific knowledge here, and nothing that raises."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from refiner.formats.reasoning import reasoning_offset

__all__ = ["common_prefix", "common_suffix", "dumps", "find_all_tagged", "next_bracket", "reasoning_offset", "skip_ws",
           "strip_reasoning"]


def strip_reasoning(text: str) -> str:
    """The answer after its reasoning block (:func:`~refiner.formats.reasoning.reasoning_offset`)."""
    return text[reasoning_offset(text) :]


def find_all_tagged(text: str, open_tag: str, close_tag: str, start: int = 0) -> list[tuple[int, int]]:
    """Spans ``(content start, content end)`` of every ``open_tag ... close_tag`` at or after ``start``, in order;
    plain substring search, linear time."""
    spans = []
    while (i := text.find(open_tag, start)) >= 0 and (j := text.find(close_tag, i + len(open_tag))) >= 0:
        spans.append((i + len(open_tag), j))
        start = j + len(close_tag)
    return spans


_WS = re.compile(r"\s*")


def skip_ws(text: str, pos: int) -> int:
    if 0 <= pos < len(text) and not text[pos].isspace():  # (no blank to skip: told without the regex, a slower call)
        return pos
    return _WS.match(text, pos).end()


# one encoder: json.dumps with options builds one per call
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def dumps(value: Any) -> str:
    """Rendering JSON: compact-ish, readable, unicode kept, key order kept."""
    return _ENCODE(value)


_BRACKET = re.compile(r"[{\[]")


def next_bracket(text: str, pos: int) -> int:
    """The position of the first ``{`` or ``[`` at or after ``pos``, or -1 (one scan, however far the other one is)."""
    m = _BRACKET.search(text, pos)
    return -1 if m is None else m.start()


def common_prefix(*texts: str) -> str:
    """The longest text every one of ``texts`` starts with."""
    return os.path.commonprefix(texts)


def common_suffix(*texts: str) -> str:
    """The longest text every one of ``texts`` ends with."""
    return os.path.commonprefix([t[::-1] for t in texts])[::-1]
