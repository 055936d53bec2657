"""Small helpers the source modules share: JSON fields, chat turns, tool lists embedded in prompts."""

from __future__ import annotations

import json
from collections.abc import Iterator
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


def call_objects(
    source: str, rid: str, rec: dict[str, Any], key: str, name_key: str, args_key: str
) -> Iterator[tuple[int, dict[str, Any], dict[str, Any]]]:
    """``(k, call, arguments)`` for each call object of the non-empty list ``rec[key]``, checked one at a time as
    it is taken: a string ``call[name_key]`` and an object ``call[args_key]`` (default ``{}``). Raises
    :class:`BadRecord` naming the call and field."""
    raw_calls = json_field(source, rid, rec, key, list)
    if not raw_calls:
        raise BadRecord(source, rid, key, "no tool call")
    for k, c in enumerate(raw_calls):
        if not isinstance(c, dict) or not isinstance(c.get(name_key), str):
            raise BadRecord(source, rid, f"{key}[{k}]", f"a call needs a string {name_key!r}")
        args = c.get(args_key, {})
        if not isinstance(args, dict):
            raise BadRecord(source, rid, f"{key}[{k}].{args_key}", f"expected an object, got {type(args).__name__}")
        yield k, c, args


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
