"""Hermes / Qwen3 native tool calls: one ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block per call.

Qwen3's chat template emits exactly this after an optional ``<think>`` block, so the refiner's own raw output parses
here. Text between blocks is allowed (models put newlines or prose there). ``apibank`` shares the tag but puts
``{"name", "parameters"}`` objects, one per line, in one block; :func:`refiner.formats.detect_format` tells them
apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat
from refiner.formats.lenient import add_call, block_values, lenient_blocks
from refiner.formats.strict import json_blocks, plain_calls, strict_fields
from refiner.formats.text import dumps

OPEN, CLOSE = "<tool_call>", "</tool_call>"


def _call_from_obj(fmt: WireFormat, obj: object, pos: int) -> ToolCall:
    name, args, _ = strict_fields(fmt, obj, pos, what="a <tool_call> block")
    return ToolCall.trusted(name, args)


class Hermes(WireFormat):
    name = "hermes"
    description = 'Qwen3/Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call> per call'
    tags = (OPEN, CLOSE)
    detection = Detection(markers=(OPEN,), closers=(CLOSE,))
    trained = True
    example = (
        '<think>\n'
        'Two independent calls.\n'
        '</think>\n'
        '\n'
        '<tool_call>\n'
        '{"name": "search_flights", "arguments": {"origin": "New York", "destination": "London", "date": "2024-08-15", "max_stops": 1}}\n'
        '</tool_call>\n'
        '<tool_call>\n'
        '{"name": "get_weather", "arguments": {"city": "London", "days": 3, "units": "metric"}}\n'
        '</tool_call>'
    )

    def claims_value(self, value: Any) -> bool:
        """An untagged object with a name (a block that lost its tags), unless its arguments are under
        ``"parameters"`` alone: that is Llama 3's JSON call (``llama3_json``)."""
        return isinstance(value, dict) and "name" in value and ("parameters" not in value or "arguments" in value)

    def parse_strict(self, text: str) -> list[ToolCall]:
        fast = plain_calls(value for value, _ in json_blocks(self, text, OPEN, CLOSE))
        if fast is not None:
            return fast
        return [_call_from_obj(self, value, pos) for value, pos in json_blocks(self, text, OPEN, CLOSE)]

    def recover(self, text: str, out: Lenient) -> None:
        for chunk in lenient_blocks(text, OPEN, CLOSE, out.problems):
            items = block_values(chunk)  # models put several objects in one block: each is a call
            if not items:
                out.note("unreadable", f"unrecoverable call: {chunk[:80]!r}")
            for item in items:
                add_call(out, item)

    def render(self, calls: Sequence[ToolCall]) -> str:
        return "\n".join(f"{OPEN}\n{dumps({'name': c.name, 'arguments': dict(c.arguments)})}\n{CLOSE}" for c in calls)
