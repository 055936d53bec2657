"""Small helpers the source modules share: JSON fields, chat turns, tool lists embedded in prompts."""

from __future__ import annotations

import json
from typing import Any

from data_gen.sources.base import BadRecord


def json_field(source: str, rid: str, rec: dict[str, Any], key: str, kind: type) -> Any:
    """``rec[key]`` as ``kind`` (list/dict), decoding a JSON string if needed. Raises :class:`BadRecord`."""
    if key not in rec or rec[key] is None:
        raise BadRecord(source, rid, key, "missing")
    value = rec[key]
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else kind()
        except json.JSONDecodeError as e:
            raise BadRecord(source, rid, key, "not valid JSON", e.msg) from None
    if not isinstance(value, kind):
        raise BadRecord(source, rid, key, f"expected a {kind.__name__}, got {type(value).__name__}")
    return value


def embedded_json(text: str, opener: str, want: type) -> tuple[Any, int, int] | None:
    """The first JSON value of type ``want`` starting at an ``opener`` character in ``text``: (value, start, end)."""
    dec = json.JSONDecoder()
    pos = text.find(opener)
    while pos >= 0:
        try:
            value, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            pos = text.find(opener, pos + 1)
            continue
        if isinstance(value, want):
            return value, pos, end
        pos = text.find(opener, end)
    return None


def concatenated_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in ``text`` (Glaive writes tool schemas one after another, not as a list)."""
    dec = json.JSONDecoder()
    out, pos = [], text.find("{")
    while pos >= 0:
        try:
            value, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            pos = text.find("{", pos + 1)
            continue
        if isinstance(value, dict):
            out.append(value)
        pos = text.find("{", end)
    return out


def tool_list_text(tools: list[dict[str, Any]]) -> str:
    return json.dumps(tools, ensure_ascii=False)
