"""API-Bank as ToolRL prompts it: optional ``<think>...</think>``, then a ``<tool_call>`` block holding one
``{"name": ..., "parameters": {...}}`` JSON object per line, then an optional ``<response>...</response>``.

It shares the ``<tool_call>`` tag with ``hermes``, told apart by the ``"parameters"`` key. A bare ``{"name",
"parameters"}`` object is Llama 3's JSON call, so this format claims no untagged value.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

from refiner.calls import ToolCall
from refiner.formats.base import DETECT_CHARS, Detection, Lenient, WireFormat
from refiner.formats.lenient import add_call, block_values, lenient_blocks
from refiner.formats.strict import JSON_DECODER, json_blocks, plain_calls, strict_fields
from refiner.formats.tags import Speller, brace_call_lines, respell_json_tags, respelt
from refiner.formats.text import dumps, reasoning_offset, skip_ws

OPEN, CLOSE = "<tool_call>", "</tool_call>"


class ApiBank(WireFormat):
    tags = (OPEN, CLOSE)
    detection = Detection(markers=(OPEN,), closers=(CLOSE,))
    example = (
        '<think>The user wants flights and the weather; both tools apply.</think>\n'
        '<tool_call>\n'
        '{"name": "search_flights", "parameters": {"origin": "New York", "destination": "London", "date": "2024-08-15", "max_stops": 1}}\n'
        '{"name": "get_weather", "parameters": {"city": "London", "days": 3, "units": "metric"}}\n'
        '</tool_call>\n'
        '<response>Searching flights and the forecast now.</response>'
    )

    def sniff(self, body: str, at: int) -> bool:
        """A ``<tool_call>`` block whose first object has ``"parameters"`` and no ``"arguments"`` (when it does not
        decode: ``"parameters"`` first, or several objects one per line) is API-Bank's, else Hermes'."""
        start = at + len(OPEN)
        end = body.find(CLOSE, start)
        block = body[start : start + DETECT_CHARS if end < 0 else min(end, start + DETECT_CHARS)]
        try:
            first, _ = JSON_DECODER.raw_decode(block, skip_ws(block, 0))
        except (ValueError, RecursionError):
            first = None
        if isinstance(first, dict) and ("parameters" in first) != ("arguments" in first):
            return "parameters" in first
        p = min((block.find(k) for k in ('"parameters"', "'parameters'") if k in block), default=-1)
        a = min((block.find(k) for k in ('"arguments"', "'arguments'") if k in block), default=-1)
        if p >= 0 and (a < 0 or p < a):
            return True
        if a >= 0:
            return False
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        return len(lines) > 1 and all(ln.startswith("{") for ln in lines)

    def parse_strict(self, text: str) -> list[ToolCall]:
        blocks = json_blocks(self, text, OPEN, CLOSE, many=True)
        read: list[tuple] = []  # (the values the fast path took, checked again below when it gives up)
        fast = plain_calls((read.append(b) or b[0] for b in blocks), args_key="parameters")
        if fast is not None:
            return fast
        calls = []
        for value, pos in chain(read, blocks):
            name, args, _ = strict_fields(self, value, pos, what="a tool call", args_key="parameters")
            calls.append(ToolCall.trusted(name, args))
        return calls

    def recover(self, text: str, out: Lenient) -> None:
        text = respelt(out, text, respell_json_tags(text, reasoning_offset(text), SPELLER, OPEN, CLOSE))
        for chunk in lenient_blocks(text, OPEN, CLOSE, out.problems, stop="<response>"):
            for item in block_values(brace_call_lines(chunk)):
                add_call(out, item)

    def render(self, calls: Sequence[ToolCall]) -> str:
        lines = [dumps({"name": c.name, "parameters": dict(c.arguments)}) for c in calls]
        return "\n".join([OPEN, *lines, CLOSE])


SPELLER = Speller(ApiBank.tags)
