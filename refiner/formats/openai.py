"""OpenAI chat completions: an assistant message whose ``tool_calls`` carry ``function.arguments`` as a JSON
*string*; a bare ``tool_calls`` list is accepted too. Prose around the JSON is allowed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat
from refiner.formats.lenient import add_call, as_items, lenient_json_in_prose
from refiner.formats.strict import expect_object, expect_str, json_in_prose, strict_json
from refiner.formats.text import dumps, strip_reasoning


def _looks_like(value: object) -> bool:
    if isinstance(value, dict):
        return "tool_calls" in value
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and "function" in v for v in value)


_CALL_KEYS = frozenset({"id", "type", "function", "index"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})


class OpenAI(WireFormat):
    tags = ('"tool_calls"', '"function"')
    detection = Detection(bare=True)

    def claims_value(self, value: Any) -> bool:
        if isinstance(value, dict):
            return "tool_calls" in value
        return isinstance(value, list) and any(isinstance(x, dict) and "function" in x for x in value)

    def parse_strict(self, text: str) -> list[ToolCall]:
        value, pos = json_in_prose(self, text, _looks_like, "assistant message with tool_calls")
        if isinstance(value, dict):
            role = value.get("role", "assistant")
            if role != "assistant":
                raise self.error(f"message role must be 'assistant', got {role!r}", pos)
            content = value.get("content")
            if content is not None and not isinstance(content, (str, list)):
                raise self.error("message 'content' must be a string, a list or null", pos)
            value = value["tool_calls"]
            if not isinstance(value, list):
                raise self.error("'tool_calls' must be a list", pos)
        return [self._call(tc, i, pos) for i, tc in enumerate(value)]

    def _call(self, tc: Any, i: int, pos: int) -> ToolCall:
        what = f"tool call #{i}"
        tc = expect_object(self, tc, what, pos)
        if unknown := set(tc) - _CALL_KEYS:
            raise self.error(f"unexpected keys {sorted(unknown)} in {what}", pos)
        if tc.get("type", "function") != "function":
            raise self.error(f"'type' of {what} must be 'function'", pos)
        if "id" in tc:
            expect_str(self, tc["id"], f"'id' of {what}", pos)
        fn = expect_object(self, tc.get("function"), f"'function' of {what}", pos)
        if unknown := set(fn) - _FUNCTION_KEYS:
            raise self.error(f"unexpected keys {sorted(unknown)} in 'function' of {what}", pos)
        name = expect_str(self, fn.get("name"), f"'function.name' of {what}", pos)
        if not name.strip():
            raise self.error(f"empty 'function.name' in {what}", pos)
        raw = expect_str(self, fn.get("arguments"), f"'function.arguments' of {what}", pos)
        args = expect_object(self, strict_json(self, raw, pos), f"decoded 'function.arguments' of {what}", pos)
        return ToolCall.trusted(name, args)

    def recover(self, text: str, out: Lenient) -> None:
        value = lenient_json_in_prose(strip_reasoning(text), _looks_like)
        if isinstance(value, dict) and "tool_calls" in value:
            value = value["tool_calls"]
        if not isinstance(value, list):
            out.note("not_a_list", "no tool_calls list")
        for item in as_items(value):
            add_call(out, item)

    def render(self, calls: Sequence[ToolCall]) -> str:
        tool_calls = [{"id": f"call_{i}", "type": "function",
                       "function": {"name": c.name, "arguments": dumps(dict(c.arguments))}}
                      for i, c in enumerate(calls)]
        return dumps({"role": "assistant", "content": None, "tool_calls": tool_calls})
