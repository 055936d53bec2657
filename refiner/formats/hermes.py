"""Hermes / Qwen3 native tool calls: one ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block per call.

Qwen3's chat template emits exactly this after an optional ``<think>`` block, so the refiner's own raw output parses
here. Text between blocks is allowed (models put newlines or prose there).
"""

from __future__ import annotations

from collections.abc import Sequence

from refiner.calls import ToolCall
from refiner.formats.base import (
    Lenient,
    WireFormat,
    dumps,
    expect_object,
    expect_str,
    find_all_tagged,
    lenient_json,
    reasoning_offset,
    register,
    strict_json,
)

OPEN, CLOSE = "<tool_call>", "</tool_call>"


def _call_from_obj(fmt: WireFormat, obj: object, pos: int) -> ToolCall:
    obj = expect_object(fmt, obj, "a <tool_call> block", pos)
    unknown = set(obj) - {"name", "arguments"}
    if unknown:
        raise fmt.error(f"unexpected keys {sorted(unknown)} in a <tool_call> block", pos)
    if "name" not in obj:
        raise fmt.error("a <tool_call> block has no 'name'", pos)
    name = expect_str(fmt, obj["name"], "'name'", pos)
    args = expect_object(fmt, obj.get("arguments", {}), "'arguments'", pos)
    return ToolCall(name, args)


@register
class Hermes(WireFormat):
    name = "hermes"
    description = 'Qwen3/Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call> per call'
    tags = (OPEN, CLOSE)

    def parse_strict(self, text: str) -> list[ToolCall]:
        start = reasoning_offset(text)
        spans = find_all_tagged(text, OPEN, CLOSE, start)
        if not spans:
            raise self.error(f"no {OPEN}...{CLOSE} block", start)
        return [_call_from_obj(self, strict_json(self, text[a:b], a), a) for a, b in spans]

    def parse_lenient(self, text: str) -> Lenient:
        out = Lenient()
        try:
            start = reasoning_offset(text)
            body = text[start:]
            chunks = body.split(OPEN)[1:] if OPEN in body else [body]
            if OPEN not in body:
                out.problems.append(f"missing {OPEN}")
            for chunk in chunks:
                if CLOSE in chunk:
                    chunk = chunk.split(CLOSE, 1)[0]
                else:
                    out.problems.append(f"missing {CLOSE}")
                obj = lenient_json(chunk)
                for item in obj if isinstance(obj, list) else [obj]:
                    call = _lenient_call(item)
                    if call is None:
                        out.problems.append(f"unrecoverable call: {chunk[:80]!r}")
                    else:
                        out.calls.append(call)
            if not out.problems:
                try:
                    self.parse_strict(text)
                except Exception as e:  # strict says what lenient glossed over
                    out.problems.append(str(e))
        except Exception as e:  # never raise
            out.problems.append(f"internal: {e!r}")
        return out

    def render(self, calls: Sequence[ToolCall]) -> str:
        return "\n".join(
            f"{OPEN}\n{dumps({'name': c.name, 'arguments': dict(c.arguments)})}\n{CLOSE}" for c in calls
        )


def _lenient_call(item: object) -> ToolCall | None:
    if not isinstance(item, dict):
        return None
    name = item.get("name")
    if not isinstance(name, str) or not name:
        return None
    args = item.get("arguments", item.get("parameters", {}))
    if isinstance(args, str):
        args = lenient_json(args)
    return ToolCall(name, args if isinstance(args, dict) else {})
