"""Values written with bare keys and the family's own quote tokens around strings (Gemma 4's ``<|"|>``, FunctionGemma's
``<escape>``: ``{label:<escape>tea<escape>,minutes:4}``): :func:`write_quoted` and :func:`read_quoted`, for the record
reader (:mod:`refiner.formats.recorded`) and derivation."""

from __future__ import annotations

import json
import re
from typing import Any

from refiner.formats.base import MAX_ARGUMENT_DEPTH
from refiner.formats.reasoning import skip_blanks
from refiner.formats.strict import JSON_DECODER
from refiner.formats.xmlvalues import Finder

MAX_KEY_CHARS = 256  # a key longer than this is not one


def write_quoted(value: Any, q_open: str, q_close: str) -> str:
    """``value`` written with bare keys and strings between the quote tokens, compact (as Gemma writes it)."""
    if isinstance(value, str):
        return q_open + value + q_close
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{write_quoted(v, q_open, q_close)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(write_quoted(v, q_open, q_close) for v in value) + "]"
    return json.dumps(value, allow_nan=False)


def holds_quote(value: Any, q_close: str) -> bool:
    """Whether ``q_close`` occurs in a string or key of ``value`` (it could not be written between the quotes)."""
    if isinstance(value, str):
        return q_close in value
    if isinstance(value, dict):
        return any(q_close in str(k) or holds_quote(v, q_close) for k, v in value.items())
    return isinstance(value, (list, tuple)) and any(holds_quote(v, q_close) for v in value)


_SCALAR = re.compile(r"[^\s,:{}\[\]]+")
_CLOSES = {"{": "}", "[": "]"}


def read_quoted(text: str, pos: int, q_open: str, q_close: str, find: Finder) -> tuple[Any, int]:
    """``(value, end)`` of the value at ``pos`` written with bare keys and quote tokens (a bare scalar in a container
    is a JSON literal), rewritten as JSON and decoded once. Raises ``ValueError`` (``not closed``: the text ends)."""
    out: list[str] = []
    stack: list[str] = []
    i, key_next = pos, False
    while True:
        i = skip_blanks(text, i)
        if i >= len(text):
            raise ValueError("a value not closed")
        if stack and text[i] == _CLOSES[stack[-1]] and out[-1] in "{[":  # an empty container
            out.append(text[i])
            stack.pop()
            i += 1
        elif key_next:
            j = text.find(":", i, i + MAX_KEY_CHARS)
            key = text[i:j].strip() if j >= 0 else ""
            if q_open and key.startswith(q_open) and key.endswith(q_close) and len(key) >= len(q_open + q_close):
                key = key[len(q_open): len(key) - len(q_close)]
            if not key:
                raise ValueError("a key with no ':' after it" + (" (not closed)" if j < 0 else ""))
            out.append(json.dumps(key) + ":")
            i, key_next = j + 1, False
            continue
        elif q_open and text.startswith(q_open, i):
            j = find.next(q_close, i + len(q_open))
            if j < 0:
                raise ValueError("a string not closed")
            out.append(json.dumps(text[i + len(q_open): j], ensure_ascii=False))
            i = j + len(q_close)
        elif text[i] in "{[":
            if len(stack) >= MAX_ARGUMENT_DEPTH:
                raise ValueError(f"more than {MAX_ARGUMENT_DEPTH} nested containers")
            stack.append(text[i])
            out.append(text[i])
            key_next = text[i] == "{" and not text.startswith("}", skip_blanks(text, i + 1))
            i += 1
            continue
        else:
            m = _SCALAR.match(text, i)
            if m is None:
                raise ValueError(f"no value at {text[i]!r}")
            out.append(m.group())
            i = m.end()
        while stack:  # after a value: closers, or a comma and the next item
            i = skip_blanks(text, i)
            if i >= len(text):
                raise ValueError("a container not closed")
            if text[i] == _CLOSES[stack[-1]]:
                out.append(text[i])
                stack.pop()
                i += 1
                continue
            if text[i] != ",":
                raise ValueError(f"{text[i]!r} where ',' or {_CLOSES[stack[-1]]!r} was expected")
            out.append(",")
            i, key_next = i + 1, stack[-1] == "{"
            break
        if not stack:
            try:
                return JSON_DECODER.decode("".join(out)), i
            except (ValueError, RecursionError) as e:
                raise ValueError(f"not a value: {e}") from None
