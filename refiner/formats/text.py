"""Text helpers every format shares: the answer after its reasoning block (:mod:`refiner.formats.reasoning`),
whitespace, JSON writing. No format-specific knowledge here, and nothing that raises."""

from __future__ import annotations

import json
import os
import re

from refiner.formats.reasoning import reasoning_offset


def strip_reasoning(text: str) -> str:
    """The answer after its reasoning block (:func:`~refiner.formats.reasoning.reasoning_offset`)."""
    return text[reasoning_offset(text) :]


_WS = re.compile(r"\s*")


def skip_ws(text: str, pos: int) -> int:
    if 0 <= pos < len(text) and not text[pos].isspace():  # (no blank to skip: told without the regex)
        return pos
    return _WS.match(text, pos).end()


# Rendering JSON: compact-ish, readable, unicode kept, key order kept.
dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


_BRACKET = re.compile(r"[{\[]")


def next_bracket(text: str, pos: int) -> int:
    """The position of the first ``{`` or ``[`` at or after ``pos``, or -1."""
    m = _BRACKET.search(text, pos)
    return -1 if m is None else m.start()


def common_prefix(*texts: str) -> str:
    """The longest text every one of ``texts`` starts with."""
    return os.path.commonprefix(texts)


def common_suffix(*texts: str) -> str:
    """The longest text every one of ``texts`` ends with."""
    return os.path.commonprefix([t[::-1] for t in texts])[::-1]
