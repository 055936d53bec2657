"""Which wire format a text is written in.

Deterministic; the first rule that gives an answer wins:

1. A tagged format that parses the text strictly, tried in :data:`TAGGED_ORDER`.
2. A best guess from tags, looking only after any ``</think>``: the format whose opening tag occurs first
   (``<nested function>`` nestools, ``<order_func>`` order, ``<function_list>`` toolace, ``<func_call>`` xlam,
   ``<functioncall>`` glaive, ``<tool_call>`` hermes or apibank); with no opening tag, the same by closing tag
   (glaive's ``<|endoftext|>`` included). ``<tool_call>`` is ``apibank`` when its first object has ``"parameters"``
   and no ``"arguments"`` (or, when it does not decode, ``"parameters"`` is seen first, or it holds several objects
   one per line), else ``hermes``.
3. An untagged format that parses the text strictly, tried in :data:`BARE_ORDER` (``nestful`` last: any list of
   ``{"name", "arguments"}`` objects is valid there, an untagged xLAM list included).
4. A guess from the shape of the first JSON value (from the first ``{``/``[``): ``openai`` (a message with
   ``tool_calls`` or items with ``function``), ``anthropic`` (a ``"type": "tool_use"`` block), ``nestools``
   (``api_name``), ``order`` (``tool_list``), ``nestful`` (a list of items with ``name``), ``apibank`` / ``hermes``
   (one object with ``parameters`` / ``arguments``).
5. Untagged pythonic calls ``[name(...)...]``: ``toolace``.
6. Otherwise ``None``.

So a tag string quoted inside the calls of an untagged format (a NESTFUL label ``"<func_call>"``) makes the text
read as that tagged format: tags are taken as the stronger signal.
"""

from __future__ import annotations

import json
import re
from typing import Any

from refiner.formats.base import MAX_LENIENT_CHARS, get, lenient_json_in_prose, skip_ws, strip_reasoning

TAGGED_ORDER = ("nestools", "order", "toolace", "xlam", "glaive", "apibank", "hermes")
BARE_ORDER = ("openai", "anthropic", "nestful")
OPEN_TAGS = (
    ("<nested function>", "nestools"),
    ("<order_func>", "order"),
    ("<function_list>", "toolace"),
    ("<func_call>", "xlam"),
    ("<functioncall>", "glaive"),
    ("<tool_call>", "tool_call"),
)
CLOSE_TAGS = (
    ("</nested function>", "nestools"),
    ("</order_func>", "order"),
    ("</function_list>", "toolace"),
    ("</func_call>", "xlam"),
    ("<|endoftext|>", "glaive"),
    ("</tool_call>", "tool_call"),
)
# How much of an untagged text is decoded to classify it.
DETECT_CHARS = 20_000
_DECODER = json.JSONDecoder()
_PYTHONIC = re.compile(r"\s*\[?\s*[A-Za-z_][\w.]*(?: [\w.]+){0,6}\(")


def _first_tag(body: str, table: tuple[tuple[str, str], ...]) -> str | None:
    best, where = None, len(body) + 1
    for tag, fmt in table:
        i = body.find(tag)
        if 0 <= i < where:
            best, where = fmt, i
    return best


def _tool_call_dialect(body: str) -> str:
    i = body.find("<tool_call>")
    block = body[i + len("<tool_call>") :] if i >= 0 else body
    block = block.split("</tool_call>", 1)[0][:DETECT_CHARS]
    try:
        first, _ = _DECODER.raw_decode(block, skip_ws(block, 0))
    except ValueError:
        first = None
    if isinstance(first, dict) and ("parameters" in first) != ("arguments" in first):
        return "apibank" if "parameters" in first else "hermes"
    p = min((block.find(k) for k in ('"parameters"', "'parameters'") if k in block), default=-1)
    a = min((block.find(k) for k in ('"arguments"', "'arguments'") if k in block), default=-1)
    if p >= 0 and (a < 0 or p < a):
        return "apibank"
    if a >= 0:
        return "hermes"
    lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
    return "apibank" if len(lines) > 1 and all(ln.startswith("{") for ln in lines) else "hermes"


def _has(items: list[Any], key: str) -> bool:
    return any(isinstance(x, dict) and key in x for x in items)


def _json_dialect(value: Any) -> str | None:
    if isinstance(value, dict):
        if "tool_calls" in value:
            return "openai"
        if isinstance(value.get("content"), list) and _has(value["content"], "type"):
            value = value["content"]
        elif "name" in value or "api_name" in value:
            if "api_name" in value:
                return "nestools"
            return "apibank" if "parameters" in value and "arguments" not in value else "hermes"
        else:
            return None
    if not isinstance(value, list) or not value:
        return None
    if _has(value, "function"):
        return "openai"
    if any(isinstance(x, dict) and x.get("type") == "tool_use" for x in value):
        return "anthropic"
    if _has(value, "api_name"):
        return "nestools"
    if _has(value, "tool_list"):
        return "order"
    if _has(value, "name"):
        return "nestful"
    return None


def detect_format(text: str) -> str | None:
    """The name of the wire format ``text`` is written in, or ``None``; deterministic (see the module doc)."""
    small = len(text) <= MAX_LENIENT_CHARS
    if small:
        for name in TAGGED_ORDER:
            if get(name).is_valid(text):
                return name
    body = strip_reasoning(text)
    fmt = _first_tag(body, OPEN_TAGS) or _first_tag(body, CLOSE_TAGS)
    if fmt == "tool_call":
        return _tool_call_dialect(body)
    if fmt is not None:
        return fmt
    if small:
        for name in BARE_ORDER:
            if get(name).is_valid(text):
                return name
    fmt = _json_dialect(lenient_json_in_prose(body[:DETECT_CHARS]))
    if fmt is not None:
        return fmt
    if _PYTHONIC.match(body):
        return "toolace"
    return None


ALL_TAGS = tuple(t for t, _ in OPEN_TAGS + CLOSE_TAGS)
