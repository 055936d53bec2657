"""The order format: which tools run at which step, without arguments: ``<order_func>[{"step": 1, "tool_list":
["a", "b"]}]</order_func>`` is one ``ToolCall(name, {}, step=k)`` per tool; the steps are ordered, a step's tools not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat
from refiner.formats.jsonfix import open_at_cut
from refiner.formats.lenient import as_items, lenient_list
from refiner.formats.strict import expect_object, expect_str_list, json_blocks
from refiner.formats.text import dumps

OPEN, CLOSE = "<order_func>", "</order_func>"
_ENTRY_KEYS = frozenset(("step", "tool_list"))


class Order(WireFormat):
    tags = (OPEN, CLOSE)
    detection = Detection(markers=(OPEN,), closers=(CLOSE,))
    names_only = True
    steps = True
    order_sensitive = True
    example = (
        '<order_func>[{"step": 1, "tool_list": ["search_flights", "get_weather"]}, {"step": 2, "tool_list": ["book_flight"]}]</order_func>'
    )

    def claims_value(self, value: Any) -> bool:
        return isinstance(value, list) and any(isinstance(x, dict) and "tool_list" in x for x in value)

    def parse_strict(self, text: str) -> list[ToolCall]:
        value, pos = next(json_blocks(self, text, OPEN, CLOSE))  # (the first block; prose may follow it)
        if not isinstance(value, list):
            raise self.error(f"{OPEN} must hold a JSON list, got {type(value).__name__}", pos)
        calls: list[ToolCall] = []
        for i, item in enumerate(value):
            item = expect_object(self, item, f"step entry #{i}", pos)
            if unknown := set(item) - _ENTRY_KEYS:
                raise self.error(f"unexpected keys {sorted(unknown)} in step entry #{i}", pos)
            step = item.get("step")
            if not isinstance(step, int) or isinstance(step, bool):
                raise self.error(f"'step' of entry #{i} must be an integer", pos)
            if "tool_list" not in item:
                raise self.error(f"step entry #{i} has no 'tool_list'", pos)
            names = expect_str_list(self, item["tool_list"], f"'tool_list' of entry #{i}", pos)
            if not all(n.strip() for n in names):
                raise self.error(f"empty tool name in entry #{i}", pos)
            calls.extend(ToolCall(n, {}, step=step) for n in names)
        return calls

    def recover(self, text: str, out: Lenient) -> None:
        for i, item in enumerate(lenient_list(text, OPEN, CLOSE, out.problems, "steps"), start=1):
            if not isinstance(item, dict):
                out.note("not_a_call", f"step entry is not an object: {str(item)[:80]!r}")
                continue
            step = item.get("step")
            if isinstance(step, str) and step.strip().isdigit():
                step = int(step)
            if not isinstance(step, int) or isinstance(step, bool):
                out.note("bad_outputs", f"entry #{i} has no integer 'step'; numbered by position")
                step = i
            tools = item.get("tool_list", item.get("tools", []))
            names = as_items(tools)
            for name in names:
                if isinstance(name, str) and name.strip():
                    out.calls.append(ToolCall(name, {}, step=step))
                else:
                    out.note("no_name", f"tool name is not a string: {str(name)[:80]!r}")
            cut = open_at_cut(tools) if type(tools) is list and names else None
            if cut is not None and cut[0] != "complete":  # the text stops inside the last tool name
                last = names[-1]
                out.mark_cut(len(out.calls) - 1 if isinstance(last, str) and last.strip() else None, None, {},
                             cut[1].clean)

    def render(self, calls: Sequence[ToolCall]) -> str:
        """Consecutive calls with the same step share one entry; a call without a step starts a new step."""
        entries: list[dict] = []
        for c in calls:
            step = c.step if c.step is not None else (entries[-1]["step"] + 1 if entries else 1)
            if entries and entries[-1]["step"] == step and c.step is not None:
                entries[-1]["tool_list"].append(c.name)
            else:
                entries.append({"step": step, "tool_list": [c.name]})
        return f"{OPEN}{dumps(entries)}{CLOSE}"
