"""xLAM function-calling 60k (``Salesforce/xlam-function-calling-60k``), wire format ``xlam``.

Record: ``{"id", "query", "answers": "<JSON list of {name, arguments}>", "tools": "<JSON list of {name,
description, parameters: {p: {type: "str, optional", description, default}}}>"}``. The records carry no system
prompt; ours states the tools and the expected ``<func_call>[...]</func_call>`` answer.

The Hub dataset is gated: loading it needs a token (``HF_TOKEN`` or ``hf auth login``) of an account that accepted
its terms at https://huggingface.co/datasets/Salesforce/xlam-function-calling-60k.
"""

from __future__ import annotations

import json
from typing import Any

from data_gen.sources import SourceDef, register
from data_gen.sources.base import BadRecord, Sample
from data_gen.sources.util import call_objects, json_field
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
    calls = [ToolCall(a["name"], args) for _, a, args in call_objects(NAME, rid, rec, "answers", "name", "arguments")]
    return Sample(NAME, rid, system_prompt(tools), query, tools, calls, "xlam")


register(SourceDef(NAME, "Salesforce/xlam-function-calling-60k", "xlam", normalise,
                   local_names=("xlam_function_calling_60k.json",),
                   description="xLAM 60k: JSON call lists in <func_call> tags", hub_gated=True))
