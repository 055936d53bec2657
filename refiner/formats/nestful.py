"""NESTFUL: a bare JSON list of ``{"name", "arguments", "label"}`` calls.

``label`` names the call's result (``var1`` in v1, ``$var_1`` in v2) and becomes ``ToolCall.outputs`` exactly as
written; later arguments refer to it inside strings (``"$var1.skyId$"``, ``"$var_1.result$"``), which stay strings.
v1 sequences end in a ``var_result`` pseudo-call without a label. Order matters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat, register
from refiner.formats.lenient import add_call, as_items, lenient_json_in_prose
from refiner.formats.strict import expect_str, json_in_prose, plain_calls, strict_fields
from refiner.formats.text import dumps, strip_reasoning


def _looks_like_calls(value: object) -> bool:
    """A non-empty list of objects with a name. (An empty list in prose is not taken for the calls: any ``[]`` in
    any text, say ``f(steps=[])``, would be; the empty call list is the whole answer ``[]``.)"""
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and "name" in v for v in value)


@register
class Nestful(WireFormat):
    name = "nestful"
    description = (
        'NESTFUL: [{"name": ..., "arguments": {...}, "label": "$var_1"}, ...] with "$var_1.result$" references'
    )
    tags = ("[", "]")
    detection = Detection(rank=120, bare=True)
    trained = True
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
        fast = plain_calls(value, outputs_key="label", outputs_as=str)
        if fast is not None:
            return fast
        calls = []
        for i, item in enumerate(value):
            name, args, extra = strict_fields(self, item, pos, what="call", index=i, extra_keys=("label",))
            outputs: tuple[str, ...] = ()
            if "label" in extra:
                label = extra["label"]
                outputs = (label if type(label) is str else expect_str(self, label, f"'label' of call #{i}", pos),)
            calls.append(ToolCall.trusted(name, args, outputs))
        return calls

    def recover(self, text: str, out: Lenient) -> None:
        value = lenient_json_in_prose(strip_reasoning(text), _looks_like_calls)
        if not isinstance(value, list):
            out.note("not_a_list", "calls are not a JSON list")
        for item in as_items(value):
            label = item.get("label") if isinstance(item, dict) else None
            add_call(out, item, outputs=(str(label),) if isinstance(label, (str, int)) else ())

    def render(self, calls: Sequence[ToolCall]) -> str:
        items = []
        for c in calls:
            item = {"name": c.name, "arguments": dict(c.arguments)}
            if c.outputs:
                item["label"] = c.outputs[0]
            items.append(item)
        return dumps(items)
