"""NESTFUL: a bare JSON list of ``{"name", "arguments", "label"}`` calls.

``label`` names the call's result (``var1`` in v1, ``$var_1`` in v2) and becomes ``ToolCall.outputs`` exactly as
written; later arguments refer to it inside strings (``"$var1.skyId$"``, ``"$var_1.result$"``), which stay strings.
v1 sequences end in a ``var_result`` pseudo-call without a label. Order matters.
"""

from __future__ import annotations

from collections.abc import Sequence

from refiner.calls import ToolCall
from refiner.formats.base import (
    Lenient,
    WireFormat,
    as_items,
    dumps,
    expect_str,
    json_in_prose,
    lenient_json_in_prose,
    plain_calls,
    register,
    strict_fields,
    strip_reasoning,
)


def _looks_like_calls(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) and "name" in v for v in value)


@register
class Nestful(WireFormat):
    name = "nestful"
    description = (
        'NESTFUL: [{"name": ..., "arguments": {...}, "label": "$var_1"}, ...] with "$var_1.result$" references'
    )
    order_sensitive = True
    tags = ("[", "]")

    def parse_strict(self, text: str) -> list[ToolCall]:
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
            out.problems.append("calls are not a JSON list")
        for item in as_items(value):
            label = item.get("label") if isinstance(item, dict) else None
            out.add(item, outputs=(str(label),) if isinstance(label, (str, int)) else ())

    def render(self, calls: Sequence[ToolCall]) -> str:
        items = []
        for c in calls:
            item = {"name": c.name, "arguments": dict(c.arguments)}
            if c.outputs:
                item["label"] = c.outputs[0]
            items.append(item)
        return dumps(items)
