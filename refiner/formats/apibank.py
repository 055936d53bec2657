"""API-Bank as ToolRL prompts it: optional ``<think>...</think>``, then a ``<tool_call>`` block holding one
``{"name": ..., "parameters": {...}}`` JSON object per line, then an optional ``<response>...</response>``.

It shares the ``<tool_call>`` tag with ``hermes`` (one ``{"name", "arguments"}`` object per block); strict parsing
here rejects ``"arguments"`` and :func:`refiner.formats.detect_format` tells the two apart by that key.
"""

from __future__ import annotations

from collections.abc import Sequence

from refiner.calls import ToolCall
from refiner.formats.base import (
    FormatError,
    Lenient,
    WireFormat,
    as_items,
    decode_at,
    dumps,
    json_blocks,
    lenient_blocks,
    lenient_json,
    plain_calls,
    register,
    skip_ws,
    strict_fields,
)

OPEN, CLOSE = "<tool_call>", "</tool_call>"


@register
class ApiBank(WireFormat):
    name = "apibank"
    description = 'API-Bank (ToolRL): <think>..</think> <tool_call>\\n{"name": ..., "parameters": {...}} per line\\n</tool_call> <response>..</response>'
    tags = (OPEN, CLOSE)

    def parse_strict(self, text: str) -> list[ToolCall]:
        fast = plain_calls(
            (value for value, _ in json_blocks(self, text, OPEN, CLOSE, many=True)), args_key="parameters"
        )
        if fast is not None:
            return fast
        calls = []
        for value, pos in json_blocks(self, text, OPEN, CLOSE, many=True):
            name, args, _ = strict_fields(self, value, pos, what="a tool call", args_key="parameters")
            calls.append(ToolCall.trusted(name, args))
        return calls

    def recover(self, text: str, out: Lenient) -> None:
        for chunk in lenient_blocks(text, OPEN, CLOSE, out.problems, stop="<response>"):
            for item in _objects(self, chunk):
                out.add(item)

    def render(self, calls: Sequence[ToolCall]) -> str:
        lines = [dumps({"name": c.name, "parameters": dict(c.arguments)}) for c in calls]
        return "\n".join([OPEN, *lines, CLOSE])


def _objects(fmt: WireFormat, chunk: str) -> list:
    """The JSON values of a block: decoded in sequence when that works, else repaired line by line."""
    items, pos = [], skip_ws(chunk, 0)
    try:
        while pos < len(chunk):
            value, end = decode_at(fmt, chunk, pos)
            items.append(value)
            pos = skip_ws(chunk, end)
        return [x for v in items for x in as_items(v)]
    except FormatError:
        pass
    lines = [ln for ln in chunk.split("\n") if ln.strip()]
    if not (len(lines) > 1 and all(ln.lstrip().startswith("{") for ln in lines)):
        lines = [chunk]
    return [x for ln in lines for x in as_items(lenient_json(ln))]
