"""Anthropic Messages: ``tool_use`` content blocks ``{"type": "tool_use", "id", "name", "input": {...}}``, as a bare
block list or inside a message's ``content``. Text and thinking blocks are allowed and ignored."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat
from refiner.formats.lenient import add_call, as_items, lenient_json_in_prose
from refiner.formats.strict import expect_object, expect_str, json_in_prose
from refiner.formats.text import dumps, strip_reasoning

IGNORED_BLOCKS = {"text", "thinking", "redacted_thinking"}
_TOOL_USE_KEYS = frozenset({"type", "id", "name", "input", "cache_control"})


def _blocks(value: object) -> object:
    return value["content"] if isinstance(value, dict) and "content" in value else value


def _looks_like(value: object) -> bool:
    blocks = _blocks(value)
    return isinstance(blocks, list) and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks)


class Anthropic(WireFormat):
    tags = ('"tool_use"',)
    detection = Detection(bare=True)

    def claims_value(self, value: Any) -> bool:
        return _looks_like(value)

    def parse_strict(self, text: str) -> list[ToolCall]:
        value, pos = json_in_prose(self, text, _looks_like, "tool_use content blocks")
        if isinstance(value, dict) and value.get("role", "assistant") != "assistant":
            raise self.error(f"message role must be 'assistant', got {value.get('role')!r}", pos)
        calls = (self._block(block, i, pos) for i, block in enumerate(_blocks(value)))
        return [c for c in calls if c is not None]

    def _block(self, block: Any, i: int, pos: int) -> ToolCall | None:
        """Content block #``i``'s call, ``None`` for a block that is ignored."""
        kind = block.get("type") if type(block) is dict else None
        if type(kind) is str and kind in IGNORED_BLOCKS:
            return None
        what = f"content block #{i}"
        block = expect_object(self, block, what, pos)
        if kind != "tool_use":
            raise self.error(f"unknown 'type' {kind!r} of {what}", pos)
        if unknown := set(block) - _TOOL_USE_KEYS:
            raise self.error(f"unexpected keys {sorted(unknown)} in {what}", pos)
        if "id" in block:
            expect_str(self, block["id"], f"'id' of {what}", pos)
        name = expect_str(self, block.get("name"), f"'name' of {what}", pos)
        if not name.strip():
            raise self.error(f"empty 'name' in {what}", pos)
        if "input" not in block:
            raise self.error(f"{what} has no 'input'", pos)
        return ToolCall.trusted(name, expect_object(self, block["input"], f"'input' of {what}", pos))

    def recover(self, text: str, out: Lenient) -> None:
        blocks = _blocks(lenient_json_in_prose(strip_reasoning(text), _looks_like))
        if not isinstance(blocks, list):
            out.note("not_a_list", "no list of content blocks")
        for block in as_items(blocks):
            if isinstance(block, dict) and isinstance(block.get("type"), str) and block["type"] in IGNORED_BLOCKS:
                continue
            add_call(out, block)

    def render(self, calls: Sequence[ToolCall]) -> str:
        return dumps([{"type": "tool_use", "id": f"toolu_{i}", "name": c.name, "input": dict(c.arguments)}
                      for i, c in enumerate(calls)])
