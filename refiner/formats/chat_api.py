"""The chat APIs' assistant messages as JSON, prose around them allowed: one reader, :class:`ApiMessage`, whose
subclasses say where the calls are and what one holds.

- :class:`OpenAI` (chat completions): a message's or a bare ``tool_calls`` list, ``function.arguments`` a JSON *string*.
- :class:`Anthropic` (Messages): ``tool_use`` content blocks ``{"type": "tool_use", "id", "name", "input": {...}}``, as
  a bare block list or inside a message's ``content``; text and thinking blocks are allowed and ignored.
- :class:`LlamaCppGeneric` (llama.cpp's generic JSON answer): one object, ``{"tool_call": CALL}``,
  ``{"tool_calls": [CALL, ...]}`` or ``{"response": ...}`` (no call: its value is the content)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, FormatError, Lenient, WireFormat
from refiner.formats.lenient import add_call, as_items, lenient_json_in_prose
from refiner.formats.message import AnswerParts, trim_turn_end
from refiner.formats.strict import decode_at, expect_object, expect_str, json_in_prose, strict_json
from refiner.formats.text import dumps, strip_reasoning


class ApiMessage(WireFormat):
    """The first JSON value ``looks_like`` accepts: an assistant message with its items under ``list_key``, or the bare
    item list; each item a call (``_call``) unless its ``type`` is in ``ignored``; ``what`` names it in errors."""

    list_key: str
    what: str
    ignored: frozenset[str] = frozenset()

    def _ignored(self, item: Any) -> bool:
        kind = item.get("type") if type(item) is dict else None
        return type(kind) is str and kind in self.ignored

    def _items(self, value: Any, pos: int) -> list:
        """The items of a message, or of the bare list; raises at a message that is not an assistant's."""
        if not isinstance(value, dict):
            return value
        role = value.get("role", "assistant")
        if role != "assistant":
            raise self.error(f"message role must be 'assistant', got {role!r}", pos)
        content = value.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise self.error("message 'content' must be a string, a list or null", pos)
        if not isinstance(value[self.list_key], list):
            raise self.error(f"{self.list_key!r} must be a list", pos)
        return value[self.list_key]

    def parse_strict(self, text: str) -> list[ToolCall]:
        value, pos = json_in_prose(self, text, self.looks_like, self.what)
        return [self._call(item, i, pos) for i, item in enumerate(self._items(value, pos)) if not self._ignored(item)]

    def _checked(self, item: Any, what: str, keys: frozenset[str], pos: int) -> dict:
        """``item`` as an object of no keys but ``keys`` whose ``id``, if any, is a string."""
        item = expect_object(self, item, what, pos)
        if unknown := set(item) - keys:
            raise self.error(f"unexpected keys {sorted(unknown)} in {what}", pos)
        if "id" in item:
            expect_str(self, item["id"], f"'id' of {what}", pos)
        return item

    def _name(self, value: Any, key: str, what: str, pos: int) -> str:
        name = expect_str(self, value, f"{key!r} of {what}", pos)
        if not name.strip():
            raise self.error(f"empty {key!r} in {what}", pos)
        return name

    def recover(self, text: str, out: Lenient) -> None:
        value = lenient_json_in_prose(strip_reasoning(text), self.looks_like)
        if isinstance(value, dict) and self.list_key in value:
            value = value[self.list_key]
        if not isinstance(value, list):
            out.note("not_a_list", f"no {self.what}")
        for item in as_items(value):
            if not self._ignored(item):
                add_call(out, item)


_CALL_KEYS = frozenset({"id", "type", "function", "index"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})


class OpenAI(ApiMessage):
    tags = ('"tool_calls"', '"function"')
    detection = Detection(bare=True, strict_needs=(*tags, "\\u"))  # (a key written with escapes: \u0066unction)
    list_key, what = "tool_calls", "assistant message with tool_calls"

    def looks_like(self, value: Any) -> bool:
        if isinstance(value, dict):
            return "tool_calls" in value
        return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and "function" in v for v in value)

    def claims_value(self, value: Any) -> bool:
        return self.looks_like(value) or isinstance(value, list) and any(isinstance(x, dict) and "function" in x
                                                                          for x in value)

    def _call(self, item: Any, i: int, pos: int) -> ToolCall:
        what = f"tool call #{i}"
        tc = self._checked(item, what, _CALL_KEYS, pos)
        if tc.get("type", "function") != "function":
            raise self.error(f"'type' of {what} must be 'function'", pos)
        fn = self._checked(tc.get("function"), f"'function' of {what}", _FUNCTION_KEYS, pos)
        name = self._name(fn.get("name"), "function.name", what, pos)
        raw = expect_str(self, fn.get("arguments"), f"'function.arguments' of {what}", pos)
        args = expect_object(self, strict_json(self, raw, pos), f"decoded 'function.arguments' of {what}", pos)
        return ToolCall(name, args)

    def render(self, calls: Sequence[ToolCall]) -> str:
        tool_calls = [{"id": f"call_{i}", "type": "function",
                       "function": {"name": c.name, "arguments": dumps(dict(c.arguments))}}
                      for i, c in enumerate(calls)]
        return dumps({"role": "assistant", "content": None, "tool_calls": tool_calls})


_TOOL_USE_KEYS = frozenset({"type", "id", "name", "input", "cache_control"})


class Anthropic(ApiMessage):
    tags = ('"tool_use"',)
    detection = Detection(bare=True, strict_needs=(*tags, "\\u"))  # (a type written with escapes: \u0074ool_use)
    list_key, what = "content", "tool_use content blocks"
    ignored = frozenset({"text", "thinking", "redacted_thinking"})

    def looks_like(self, value: Any) -> bool:
        blocks = value["content"] if isinstance(value, dict) and "content" in value else value
        return isinstance(blocks, list) and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks)

    claims_value = looks_like

    def _call(self, item: Any, i: int, pos: int) -> ToolCall:
        what = f"content block #{i}"
        block = expect_object(self, item, what, pos)
        if block.get("type") != "tool_use":
            raise self.error(f"unknown 'type' {block.get('type')!r} of {what}", pos)
        block = self._checked(block, what, _TOOL_USE_KEYS, pos)
        name = self._name(block.get("name"), "name", what, pos)
        if "input" not in block:
            raise self.error(f"{what} has no 'input'", pos)
        return ToolCall(name, expect_object(self, block["input"], f"'input' of {what}", pos))

    def render(self, calls: Sequence[ToolCall]) -> str:
        return dumps([{"type": "tool_use", "id": f"toolu_{i}", "name": c.name, "input": dict(c.arguments)}
                      for i, c in enumerate(calls)])


_GENERIC_KEYS = ("tool_call", "tool_calls", "response")
_GENERIC_CALL_KEYS = frozenset({"name", "arguments", "id"})


class LlamaCppGeneric(ApiMessage):
    """A call is ``{"name", "arguments": {...}}`` (``"id"`` read and dropped); the answer: see the module docstring."""

    tags = tuple(f'"{k}"' for k in _GENERIC_KEYS)
    detection = Detection(bare=True, markers=('"tool_call"',), strict_needs=tags)  # (read only as written: _answer)
    list_key, what = "tool_calls", 'JSON object with one key, "tool_call", "tool_calls" or "response"'
    channels = True  # (a response is content, read without a call)

    def sniff(self, body: str, at: int) -> bool:
        """The key opens the answer's object (a key of that name elsewhere is another format's)."""
        return body[:at].strip() == "{"

    def looks_like(self, value: Any) -> bool:
        return isinstance(value, dict) and any(k in value for k in _GENERIC_KEYS)

    def claims_value(self, value: Any) -> bool:
        return isinstance(value, dict) and ("tool_call" in value or list(value) == ["response"])

    def _answer(self, text: str) -> tuple[dict, int]:
        """The answer's object and its start, else raises (a text holding none of its keys is not decoded)."""
        if not any(tag in text for tag in self.tags):
            raise self.error(f"no {self.what} found", 0)
        return json_in_prose(self, text, lambda v: self.looks_like(v) and len(v) == 1, self.what)

    def parse_strict(self, text: str) -> list[ToolCall]:
        value, pos = self._answer(text)
        if "response" in value:
            return []
        items = value.get("tool_calls", [value.get("tool_call")])
        if not isinstance(items, list):
            raise self.error("'tool_calls' must be a list", pos)
        return [self._call(item, i, pos) for i, item in enumerate(items)]

    def _call(self, item: Any, i: int, pos: int) -> ToolCall:
        what = f"tool call #{i}"
        call = self._checked(item, what, _GENERIC_CALL_KEYS, pos)
        name = self._name(call.get("name"), "name", what, pos)
        return ToolCall(name, expect_object(self, call.get("arguments"), f"'arguments' of {what}", pos))

    def recover(self, text: str, out: Lenient) -> None:
        value = lenient_json_in_prose(strip_reasoning(text), self.looks_like)
        if not self.looks_like(value):
            out.note("not_a_list", f"no {self.what}")
            return
        items = value.get("tool_calls", [value["tool_call"]] if "tool_call" in value else [])
        for item in as_items(items):
            add_call(out, item)

    def answer_parts(self, text: str) -> AnswerParts:
        """A ``response`` is content in place of its object (a string as written, any other value as JSON)."""
        try:
            value, pos = self._answer(text)
        except FormatError:
            value, pos = {}, 0
        if "response" not in value:
            return super().answer_parts(text)
        said, end = value["response"], decode_at(self, text, pos)[1]
        content = text[:pos] + (said if isinstance(said, str) else dumps(said)) + text[end:]
        return AnswerParts(trim_turn_end(content), None, (len(text), len(text)))

    def render(self, calls: Sequence[ToolCall]) -> str:
        if len(calls) == 1:
            return dumps({"tool_call": {"name": calls[0].name, "arguments": dict(calls[0].arguments)}})
        return dumps({"tool_calls": [{"name": c.name, "arguments": dict(c.arguments), "id": f"call_{i}"}
                                     for i, c in enumerate(calls)]})
