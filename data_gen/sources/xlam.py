"""xLAM function-calling 60k (``Salesforce/xlam-function-calling-60k``), wire format ``xlam``.

Record: ``{"id", "query", "answers": "<JSON list of {name, arguments}>", "tools": "<JSON list of {name,
description, parameters: {p: {type: "str, optional", description, default}}}>"}``. The records carry no system
prompt; ours states the tools and the expected ``<func_call>[...]</func_call>`` answer.
"""

from __future__ import annotations

import json
from typing import Any

from data_gen.sources import SourceDef, register
from data_gen.sources.base import BadRecord, Sample
from data_gen.sources.util import json_field
from refiner.calls import ToolCall

NAME = "xlam"
SYSTEM_TEMPLATE = (
    "You can call functions to answer the user. The functions available are listed below in JSON.\n{tools}\n"
    "When you call functions, answer with a JSON list of calls wrapped in <func_call> and </func_call>, for "
    'example <func_call>[{{"name": "function_name", "arguments": {{"param": "value"}}}}]</func_call>. '
    "Use only the functions and parameters listed."
)


def system_prompt(tools: list[dict[str, Any]]) -> str:
    return SYSTEM_TEMPLATE.format(tools=json.dumps(tools, ensure_ascii=False))


def normalise(rid: str, rec: dict[str, Any]) -> Sample:
    query = rec.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadRecord(NAME, rid, "query", "missing or not a string")
    tools = json_field(NAME, rid, rec, "tools", list)
    if not tools or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
        raise BadRecord(NAME, rid, "tools", "expected a non-empty list of {name, ...} objects")
    answers = json_field(NAME, rid, rec, "answers", list)
    if not answers:
        raise BadRecord(NAME, rid, "answers", "no tool call")
    calls = []
    for k, a in enumerate(answers):
        if not isinstance(a, dict) or not isinstance(a.get("name"), str):
            raise BadRecord(NAME, rid, f"answers[{k}]", "a call needs a string 'name'")
        args = a.get("arguments", {})
        if not isinstance(args, dict):
            raise BadRecord(NAME, rid, f"answers[{k}].arguments", f"expected an object, got {type(args).__name__}")
        calls.append(ToolCall(a["name"], args))
    return Sample(NAME, rid, system_prompt(tools), query, tools, calls, "xlam")


register(SourceDef(NAME, "Salesforce/xlam-function-calling-60k", "xlam", normalise,
                   local_names=("xlam_function_calling_60k.json",),
                   description="xLAM 60k: JSON call lists in <func_call> tags"))
