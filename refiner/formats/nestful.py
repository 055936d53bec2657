"""NESTFUL: a bare JSON list of ``{"name", "arguments", "label"}`` calls. A call's arguments are under ``"arguments"``
or, as the list a JSON schema constrains for ``tool_choice="required"`` writes them, under ``"parameters"`` (not both);
the calls are written back under ``"arguments"``. ``label`` names the call's result (``var1`` in v1, ``$var_1`` in v2)
and becomes ``ToolCall.outputs`` exactly as written; later arguments refer to it inside strings (``"$var1.skyId$"``,
``"$var_1.result$"``), which stay strings. v1 sequences end in a ``var_result`` pseudo-call without a label. Order
matters."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat, offered_tools
from refiner.formats.lenient import add_call, as_items, lenient_json_in_prose
from refiner.formats.pythonic_mend import MEND_CHARS_PER_UNIT, MEND_UNITS_PER_EDIT, mend, value_fits
from refiner.formats.reasoning import skip_blanks
from refiner.formats.strict import JSON_DECODER, expect_str, json_head, json_in_prose, strict_fields
from refiner.formats.text import dumps, strip_reasoning


def _args_key(item: Any) -> str:
    return "parameters" if type(item) is dict and "parameters" in item else "arguments"


def _looks_like_calls(value: object) -> bool:
    """A non-empty list of objects with a name (the empty call list is only the whole answer ``[]``)."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and "name" in v for v in value)


class Nestful(WireFormat):
    tags = ("[", "]")
    detection = Detection(bare=True, strict_needs=('"name"', "[]", "\\u"))  # (a key written with escapes: \u006eame)
    outputs = "one"
    order_sensitive = True
    example = (
        '[{"name": "search_flights", "arguments": {"origin": "New York", "destination": "London", "date": "2024-08-15"}, "label": "$var_1"}, {"name": "book_flight", "arguments": {"flight_id": "$var_1.flight_id$", "seat": "aisle"}, "label": "$var_2"}]'
    )

    def claims_value(self, value: Any) -> bool:
        return isinstance(value, list) and any(isinstance(x, dict) and "name" in x for x in value)

    def parse_strict(self, text: str) -> list[ToolCall]:
        if strip_reasoning(text).strip() == "[]":
            return []
        value, pos = json_in_prose(self, text, _looks_like_calls, "JSON list of calls")
        calls = []
        for i, item in enumerate(value):
            name, args, extra = strict_fields(self, item, pos, what="call", index=i, args_key=_args_key(item),
                                              extra_keys=("label",))
            outputs = (expect_str(self, extra["label"], f"'label' of call #{i}", pos),) if "label" in extra else ()
            calls.append(ToolCall(name, args, outputs))
        return calls

    def recover(self, text: str, out: Lenient) -> None:
        body = strip_reasoning(text)
        # a character lost or doubled (mended), else list arguments' brackets lost
        if (whole := mend_json_list(body, offered_tools()) or read_bare_lists(body, offered_tools())) is not None:
            value = whole[0]
            out.note("mended", f"call list read whole: {whole[1]}")
        else:
            value = lenient_json_in_prose(body, _looks_like_calls)
        if not isinstance(value, list):
            out.note("not_a_list", "calls are not a JSON list")
        for item in as_items(value):
            label = item.get("label") if isinstance(item, dict) else None
            add_call(out, item, outputs=(str(label),) if isinstance(label, (str, int)) else ())

    def render(self, calls: Sequence[ToolCall]) -> str:
        return dumps([{"name": c.name, "arguments": dict(c.arguments)} | ({"label": c.outputs[0]} if c.outputs else {})
                      for c in calls])


# ---- Mending a list that lost or doubled one character (lenient: refiner.formats.pythonic_mend.mend) -----------
MAX_MEND_CHARS = 8192  # the longest text mended
MAX_MEND_WINDOW = 256  # characters around the decoder's stop where edits are tried
MAX_MEND_EDITS = 512  # edits tried per text
_MEND_WHAT = {'"': "a quote", ":": "a ':'", ",": "a comma", "[": "a '['", "]": "a ']'", "{": "a '{'", "}": "a '}'"}

def _json_edits(src: str, at: int) -> list[tuple[int, str]]:
    """``(position, char)`` edits worth trying around ``at`` (inside the list's brackets), nearest first: ``char``
    inserted before ``position``, or (empty) the doubled closer there dropped."""
    edits = []
    lo, hi = max(1, at - MAX_MEND_WINDOW // 2), min(len(src) - 1, at + MAX_MEND_WINDOW // 2)
    for p in range(lo, hi + 1):
        a, b, before = src[p - 1], src[p], src[p - 2] if p > 1 else ""
        if (a != '"' or b != '"') and a != "\\":  # (a quote after a backslash would be text, not a quote)
            edits.append((p, '"'))
        if a == '"':
            edits.append((p, ":"))
        if a not in ",:[{ " or (a == " " and before not in ",:[{"):
            edits.append((p, ","))
        if a in ":[," or (a == " " and before in ":[,"):
            edits += [(p, "["), (p, "{")]
        if a not in ",:[{ ":
            edits += [(p, "]"), (p, "}")]
        if b in "]}" and a == b:
            edits.append((p, ""))
    edits.sort(key=lambda e: abs(e[0] - at))
    return edits[:MAX_MEND_EDITS]


def _as_calls(value: Any) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls of a well-formed NESTFUL list (a name, an arguments object, maybe a label each), else ``None``."""
    if not _looks_like_calls(value):
        return None
    calls = []
    for item in value:
        key = _args_key(item)
        name, args = item.get("name"), item.get(key)
        if type(name) is not str or not isinstance(args, dict) or not {"name", key, "label"}.issuperset(item):
            return None
        calls.append((name, args))
    return calls


def mend_json_list(text: str, offered: Mapping[str, Any] | None = None) -> tuple[list[Any], str] | None:
    """For a JSON list of calls that does not decode: ``(the list, what was mended)`` when one edit near where
    decoding stops makes it decode whole to well-formed calls (:func:`~refiner.formats.pythonic_mend.mend`); else
    ``None``. No quote is inserted where only closing brackets follow (the text may stop in a string)."""
    if len(text) > 2 * MAX_MEND_CHARS:
        return None
    src = text.strip()
    if len(src) > MAX_MEND_CHARS or len(src) < 2 or src[0] != "[" or src[-1] != "]":
        return None
    try:
        JSON_DECODER.raw_decode(src)
        return None  # (valid JSON: there is nothing to mend, the list is read as it is)
    except json.JSONDecodeError as e:
        at = e.pos
    except (ValueError, RecursionError):
        return None
    cost = MEND_UNITS_PER_EDIT + len(src) // MEND_CHARS_PER_UNIT
    closers_from = len(src.rstrip("]} \t\r\n"))  # only closing brackets from here on

    def read(edited: str) -> tuple[list[tuple[str, dict[str, Any]]], Any] | None:
        value, end = json_head(edited) or (None, -1)
        calls = _as_calls(value) if end == len(edited) else None
        return None if calls is None else (calls, value)

    edits = [(p, ch) for p, ch in _json_edits(src, at) if not (ch == '"' and p >= closers_from)]
    mended = mend(src, edits, cost, read, offered, _MEND_WHAT)
    return None if mended is None else (mended[1], mended[2])


# ---- Bracketless lists (lenient), list arguments' too: ``{"stops": "Santa Barbara", "Monterey", "unit": "km"}`` -----

MAX_LOOSE_DEPTH = 32


class _NotLoose(ValueError):
    pass


def _loose_value(src: str, i: int, depth: int, loosened: list[tuple[dict, str]]) -> tuple[Any, int]:
    """The JSON value at ``i`` (after spaces), objects read with :func:`_loose_object`; ``(value, end)``."""
    i = skip_blanks(src, i)
    if depth > MAX_LOOSE_DEPTH or i >= len(src):
        raise _NotLoose
    ch = src[i]
    if ch == "{":
        return _loose_object(src, i + 1, depth + 1, loosened)
    if ch == "[":
        out: list[Any] = []
        i = skip_blanks(src, i + 1)
        if src.startswith("]", i):
            return out, i + 1
        while True:
            value, i = _loose_value(src, i, depth + 1, loosened)
            out.append(value)
            i = skip_blanks(src, i)
            if src.startswith(",", i):
                i += 1
            elif src.startswith("]", i):
                return out, i + 1
            else:
                raise _NotLoose
    if (head := json_head(src, i)) is None:
        raise _NotLoose
    return head


def _loose_object(src: str, i: int, depth: int, loosened: list[tuple[dict, str]]) -> tuple[dict, int]:
    """The object whose ``{`` ends at ``i``; values after a member's value in place of the next key (``"k": 1, 2``)
    make that member a list (recorded in ``loosened``)."""
    obj: dict[str, Any] = {}
    i = skip_blanks(src, i)
    if src.startswith("}", i):
        return obj, i + 1
    while True:
        i = skip_blanks(src, i)
        if not src.startswith('"', i):
            raise _NotLoose
        key, i = _loose_value(src, i, depth, loosened)
        i = skip_blanks(src, i)
        if not isinstance(key, str) or not src.startswith(":", i) or key in obj:
            raise _NotLoose
        value, i = _loose_value(src, i + 1, depth, loosened)
        more = []
        i = skip_blanks(src, i)
        while src.startswith(",", i):
            j = skip_blanks(src, i + 1)
            key_end = (json_head(src, j) or (None, -1))[1] if src.startswith('"', j) else -1  # (a key: a string, ':')
            if key_end >= 0 and src.startswith(":", skip_blanks(src, key_end)) or src.startswith("}", j):
                break
            extra, i = _loose_value(src, j, depth, loosened)
            more.append(extra)
            i = skip_blanks(src, i)
        if more:
            value = [value, *more]
            loosened.append((obj, key))
        obj[key] = value
        if src.startswith(",", i):
            i += 1
        elif src.startswith("}", i):
            return obj, i + 1
        else:
            raise _NotLoose


def read_bare_lists(text: str, offered: Mapping[str, Any] | None) -> tuple[list[Any], str] | None:
    """For a text whose brackets were lost: ``(the list of calls, what was read so)`` when every bare list argument is
    one the tools declare an array its values fit; else ``None``. Linear, at most :data:`MAX_MEND_CHARS` characters."""
    if not offered or len(text) > 2 * MAX_MEND_CHARS:
        return None
    src = text.strip()
    if len(src) > MAX_MEND_CHARS or not src.startswith(("{", "[")):
        return None
    loosened: list[tuple[dict, str]] = []
    depth = 0
    if not src.startswith("["):  # the list's own brackets lost too: the call objects one after another
        src, depth = f"[{src}]", -1
    try:
        items, end = _loose_value(src, 0, depth, loosened)
    except (_NotLoose, RecursionError):
        return None
    calls = _as_calls(items) if skip_blanks(src, end) == len(src) else None
    if calls is None or not loosened:
        return None
    for obj, key in loosened:
        owner = next((name for name, args in calls if args is obj), None)
        params = offered.get(owner) if owner is not None else None
        param = params.get(key) if isinstance(params, Mapping) else None
        if getattr(param, "type", None) != "array" or not value_fits(obj[key], param):
            return None
    return items, "list argument(s) written without brackets: " + ", ".join(repr(k) for _, k in loosened[:4])
