"""NesTools nested calls: ``<nested function>[{"api_name", "parameters", "responses"}, ...]</nested function>``;
``responses`` (``API_call_N``, which later calls pass as values) are :attr:`ToolCall.outputs`. Order matters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat
from refiner.formats.lenient import add_call, lenient_list
from refiner.formats.strict import expect_str_list, plain_calls, strict_fields, tagged_list
from refiner.formats.text import dumps

OPEN, CLOSE = "<nested function>", "</nested function>"


class NesTools(WireFormat):
    tags = (OPEN, CLOSE)
    detection = Detection(markers=(OPEN,), closers=(CLOSE,))
    outputs = "list"
    order_sensitive = True
    example = (
        '<nested function>[{"api_name": "search_flights", "parameters": {"origin": "New York", "destination": "London", "date": "2024-08-15"}, "responses": ["API_call_0"]}, {"api_name": "book_flight", "parameters": {"flight_id": "API_call_0", "seat": "aisle"}, "responses": ["API_call_1"]}]</nested function>'
    )

    def claims_value(self, value: Any) -> bool:
        items = value if isinstance(value, list) else [value]
        return any(isinstance(x, dict) and "api_name" in x for x in items)

    def parse_strict(self, text: str) -> list[ToolCall]:
        value, pos = tagged_list(self, text, OPEN, CLOSE)
        fast = plain_calls(value, "api_name", "parameters", "responses", list)
        if fast is not None:
            return fast
        calls = []
        for i, item in enumerate(value):
            name, args, extra = strict_fields(self, item, pos, what="call", index=i, name_key="api_name",
                                              args_key="parameters", extra_keys=("responses",))
            outputs = expect_str_list(self, extra.get("responses", []), f"'responses' of call #{i}", pos)
            calls.append(ToolCall.trusted(name, args, outputs))
        return calls

    def recover(self, text: str, out: Lenient) -> None:
        for item in lenient_list(text, OPEN, CLOSE, out.problems, "calls"):
            responses = item.get("responses", []) if isinstance(item, dict) else []
            if not isinstance(responses, list):
                out.note("bad_outputs", f"'responses' is not a list: {str(responses)[:80]!r}")
                responses = []
            outputs = tuple(str(r) for r in responses if isinstance(r, (str, int)))
            add_call(out, item, outputs=outputs)

    def render(self, calls: Sequence[ToolCall]) -> str:
        items = [{"api_name": c.name, "parameters": dict(c.arguments), "responses": list(c.outputs)} for c in calls]
        return f"{OPEN}{dumps(items)}{CLOSE}"
