"""NesTools (GitHub ``hhan1018/NesTools`` ``data/test_data.jsonl``), wire format ``nestools``; also the simplified
``order`` variant (tool names grouped by step) built from the same records.

Record: ``{"test_id", "api": [{api_name, api_description, parameters, required, responses}], "task", "call":
[{api_name, parameters, responses: ["API_call_0", ...]}], "field"}``. Later calls pass ``"API_call_N"`` strings to
refer to earlier results.
"""

from __future__ import annotations

import json
import re
from typing import Any

from data_gen.sources import SourceDef, register
from data_gen.sources.base import BadRecord, Sample
from data_gen.sources.util import call_objects, json_field
from refiner.calls import ToolCall

NAME = "nestools"
_REF = re.compile(r"API_call_\d+")

SYSTEM_TEMPLATE = (
    "You solve the user's task by calling the tools below. A task may need several calls in sequence, where a later "
    "call takes the result of an earlier one as input. Name every result of a call with a placeholder API_call_0, "
    "API_call_1, ... (numbered across the whole answer, one per response field, in order) and pass the placeholder "
    "string as the argument of a later call that needs it.\nTools (JSON):\n{tools}\n"
    'Answer with the calls in execution order, as a JSON list wrapped in <nested function> and </nested function>: '
    '<nested function>[{{"api_name": "...", "parameters": {{...}}, "responses": ["API_call_0"]}}, ...]'
    "</nested function>"
)
ORDER_SYSTEM_TEMPLATE = (
    "You plan which tools to call for the user's task, and in which order. Tools whose inputs do not depend on "
    "each other run in the same step; a tool that needs another tool's result runs in a later step.\n"
    "Tools (JSON):\n{tools}\n"
    "Answer with only the tool names grouped by step, as a JSON list wrapped in <order_func> and </order_func>: "
    '<order_func>[{{"step": 1, "tool_list": ["tool_a", "tool_b"]}}, {{"step": 2, "tool_list": ["tool_c"]}}]'
    "</order_func>"
)


def normalise(rid: str, rec: dict[str, Any]) -> Sample:
    tools = json_field(NAME, rid, rec, "api", list)
    if not tools or not all(isinstance(t, dict) and isinstance(t.get("api_name"), str) for t in tools):
        raise BadRecord(NAME, rid, "api", "expected a non-empty list of {api_name, ...} objects")
    task = rec.get("task")
    if not isinstance(task, str) or not task.strip():
        raise BadRecord(NAME, rid, "task", "missing or not a string")
    calls = []
    for k, c, params in call_objects(NAME, rid, rec, "call", "api_name", "parameters"):
        outs = c.get("responses") or []
        if not isinstance(outs, list) or not all(isinstance(o, str) for o in outs):
            raise BadRecord(NAME, rid, f"call[{k}].responses", "expected a list of placeholder strings")
        calls.append(ToolCall(c["api_name"], params, tuple(outs)))
    system = SYSTEM_TEMPLATE.format(tools=json.dumps(tools, ensure_ascii=False))
    return Sample(NAME, rid, system, task, tools, calls, "nestools", meta={"field": rec.get("field")})


def steps(calls: list[ToolCall]) -> list[int]:
    """Step number (1-based) of each call: one more than the latest step whose results it uses."""
    made_at: dict[str, int] = {}
    out = []
    for c in calls:
        refs = _REF.findall(json.dumps(dict(c.arguments), ensure_ascii=False))
        step = 1 + max((made_at.get(r, 0) for r in refs), default=0)
        out.append(step)
        for o in c.outputs:
            made_at[o] = step
    return out


def to_order(sample: Sample) -> Sample:
    """The simplified variant: one ``ToolCall(name, {}, step=k)`` per call, grouped by dependency step."""
    st = steps(sample.calls)
    calls = sorted((ToolCall(c.name, {}, step=s) for c, s in zip(sample.calls, st)), key=lambda c: c.step)
    system = ORDER_SYSTEM_TEMPLATE.format(tools=json.dumps(sample.tools, ensure_ascii=False))
    return Sample(sample.source, sample.record_id, system, sample.query, sample.tools, calls, "order",
                  meta={**sample.meta, "variant": "simplified"})


register(SourceDef(NAME, None, "nestools", normalise, local_names=("test_data.jsonl",),
                   description="NesTools nested calls with API_call_N placeholders (GitHub test split)",
                   obtain="it is published on GitHub only: git clone https://github.com/hhan1018/NesTools and use "
                          "NesTools/data/test_data.jsonl"))
