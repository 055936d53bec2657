"""Errors tied to the request: a value the user states, dropped from the call or copied wrongly into it.

No rule can repair these (tier 1 invents no value, and a wrong value is well-formed); only a reader of the request
can. An operation is ``op(calls, tools, fmt, rng, request) -> (new calls, detail) | None`` like
:mod:`data_gen.corrupt.call_errors`' operations plus ``request``, the user's words
(:func:`data_gen.corrupt.mutations.request_text`); ``None`` when no argument value is stated in the request (or,
for a dropped value, none of those is a required parameter of a declared tool).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from data_gen.corrupt import mutations
from refiner.calls import ToolCall
from refiner.formats import WireFormat
from refiner.specs import ToolSpec

QueryOp = Callable[
    [list[ToolCall], Mapping[str, ToolSpec], WireFormat, random.Random, str], "tuple[list[ToolCall], str] | None"
]


def _stated(calls: Sequence[ToolCall], request: str, keep: Callable[[int, str], bool]) -> list[tuple[int, str]]:
    return [(i, k) for i, c in enumerate(calls) for k, v in c.arguments.items()
            if keep(i, k) and mutations.stated_in(v, request)]


def _with(calls: list[ToolCall], i: int, arguments: dict[str, Any]) -> list[ToolCall]:
    c = calls[i]
    return calls[:i] + [ToolCall(c.name, arguments, c.outputs, c.step)] + calls[i + 1 :]


def query_value_dropped(calls, tools, fmt, rng, request):
    def required(i: int, key: str) -> bool:
        spec = tools.get(calls[i].name)
        return spec is not None and key in spec.required

    found = _stated(calls, request, required)
    if not found:
        return None
    i, key = rng.choice(found)
    value = calls[i].arguments[key]
    args = {k: v for k, v in calls[i].arguments.items() if k != key}
    return _with(calls, i, args), f"call {i}: dropped required {key!r}={value!r}, stated in the request"


def query_value_altered(calls, tools, fmt, rng, request):
    found = _stated(calls, request, lambda i, key: True)
    if not found:
        return None
    i, key = rng.choice(found)
    old = calls[i].arguments[key]
    new = mutations.altered(old, request, rng)
    if new == old:
        return None
    return _with(calls, i, {**calls[i].arguments, key: new}), f"call {i}: {key!r} {old!r} -> {new!r} (request: {old!r})"


QUERY_OPS: dict[str, QueryOp] = {
    "query_value_dropped": query_value_dropped,
    "query_value_altered": query_value_altered,
}
