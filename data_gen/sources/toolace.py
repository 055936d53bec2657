"""ToolACE (``Team-ACE/ToolACE``), wire format ``toolace``: pythonic call lists ``[Func(a="v"), g(b=1)]``.

Record: ``{"system": "<instructions> ... Here is a list of functions in JSON format that you can invoke:\\n[...]",
"conversations": [{"from": "user"|"assistant"|"tool", "value": str}]}``. The tool list is read from the system
prompt; the gold calls are the first assistant turn. As in the paper, records whose calls cannot be parsed (tool
names with spaces, for one) are filtered out, and counted.
"""

from __future__ import annotations

import re
from typing import Any

from data_gen.sources import SourceDef, register
from data_gen.sources.base import BadRecord, Sample, parse_calls
from data_gen.sources.util import embedded_json

NAME = "toolace"
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "gpt": "assistant", "tool": "tool",
          "function": "tool", "observation": "tool"}
_SPACED_NAME = re.compile(r"^\s*\[\s*[A-Za-z_][\w.]*(?: +[\w.]+)+\s*\(")


def normalise(rid: str, rec: dict[str, Any]) -> Sample:
    system = rec.get("system")
    if not isinstance(system, str) or not system.strip():
        raise BadRecord(NAME, rid, "system", "missing or not a string")
    found = embedded_json(system, "[", list)
    if not found or not found[0] or not all(isinstance(t, dict) and "name" in t for t in found[0]):
        raise BadRecord(NAME, rid, "system", "no JSON tool list in the system prompt")
    tools = found[0]
    turns = rec.get("conversations")
    if not isinstance(turns, list) or not turns:
        raise BadRecord(NAME, rid, "conversations", "missing or empty")
    query: list[dict[str, Any]] = []
    for k, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise BadRecord(NAME, rid, f"conversations[{k}]", "a turn needs 'from' and a string 'value'")
        role = _ROLES.get(str(turn.get("from", "")).lower())
        if role is None:
            raise BadRecord(NAME, rid, f"conversations[{k}].from", f"unknown role {turn.get('from')!r}")
        if role == "assistant":
            value = turn["value"].strip()
            if not value.startswith("["):
                raise BadRecord(NAME, rid, f"conversations[{k}].value", "the first assistant turn is not a tool call")
            if _SPACED_NAME.match(value):
                raise BadRecord(NAME, rid, f"conversations[{k}].value", "tool name with spaces (not parseable)")
            calls = parse_calls(NAME, rid, f"conversations[{k}].value", "toolace", value)
            return Sample(NAME, rid, system.strip(), query, tools, calls, "toolace")
        query.append({"role": role, "content": turn["value"]})
    raise BadRecord(NAME, rid, "conversations", "no assistant turn")


register(SourceDef(NAME, "Team-ACE/ToolACE", "toolace", normalise, local_names=("data.json",),
                   description="ToolACE: pythonic call lists [f(a=1), g(b='x')] in <function_list> tags"))
