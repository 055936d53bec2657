"""Glaive function-calling v2 (``glaiveai/glaive-function-calling-v2``), wire format ``glaive``.

Two record shapes are read:
- raw: ``{"system": "SYSTEM: ... Use them if required -\\n{schema} {schema}", "chat": "USER: ...\\n\\n\\nASSISTANT:
  <functioncall> {...} <|endoftext|>\\n\\n\\nFUNCTION RESPONSE: ..."}``; the call turn is parsed by the ``glaive``
  wire format (its arguments are a single-quoted JSON string);
- ShareGPT (LLaMA-Factory's converted subset): ``{"conversations": [{"from": "human"|"gpt"|"function_call"|
  "observation", "value"}], "tools": "<JSON list>"}``.

One sample per record: the first tool call, with the dialogue before it as the query (raw records' end-of-text
markers are removed from the earlier turns).
"""

from __future__ import annotations

import json
import re
from typing import Any

from data_gen.sources import SourceDef, register
from data_gen.sources.base import BadRecord, Sample, parse_calls
from data_gen.sources.util import concatenated_objects, json_field
from refiner.calls import ToolCall

NAME = "glaive"
SYSTEM_HEAD = "You are a helpful assistant with access to the following functions. Use them if required -"
_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "observation": "tool",
          "function_response": "tool"}
_EOT = "<|endoftext|>"
_TURN = re.compile(r"(?:^|\n+)\s*(USER|ASSISTANT|FUNCTION RESPONSE):\s*")


def system_prompt(tools: list[dict[str, Any]]) -> str:
    """The Glaive system prompt: the fixed head, then each tool schema (concatenated, as Glaive writes them)."""
    return SYSTEM_HEAD + "\n" + "\n".join(json.dumps(t, indent=4, ensure_ascii=False) for t in tools)


def _sharegpt(rid: str, rec: dict[str, Any]) -> Sample:
    tools = json_field(NAME, rid, rec, "tools", list) if rec.get("tools") else []
    if not tools:
        raise BadRecord(NAME, rid, "tools", "no tools (a plain chat record)")
    turns = rec["conversations"]
    if not isinstance(turns, list):
        raise BadRecord(NAME, rid, "conversations", "expected a list of turns")
    query: list[dict[str, Any]] = []
    for k, turn in enumerate(turns):
        if not isinstance(turn, dict) or "from" not in turn or not isinstance(turn.get("value"), str):
            raise BadRecord(NAME, rid, f"conversations[{k}]", "a turn needs 'from' and a string 'value'")
        if turn["from"] == "function_call":
            try:
                obj = json.loads(turn["value"])
                args = obj.get("arguments") or {}
                args = json.loads(args) if isinstance(args, str) else args
                call = ToolCall(obj["name"], args)
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
                raise BadRecord(NAME, rid, f"conversations[{k}].value", "function call is not a valid "
                                "{name, arguments} object", repr(e)) from None
            if not any(m["role"] == "user" for m in query):
                raise BadRecord(NAME, rid, "conversations", "no user turn before the function call")
            return Sample(NAME, rid, system_prompt(tools), query, tools, [call], "glaive")
        role = _ROLES.get(turn["from"])
        if role is None:
            raise BadRecord(NAME, rid, f"conversations[{k}].from", f"unknown role {turn['from']!r}")
        query.append({"role": role, "content": turn["value"]})
    raise BadRecord(NAME, rid, "conversations", "no function call in the dialogue")


def _raw(rid: str, rec: dict[str, Any]) -> Sample:
    system = rec["system"]
    if not isinstance(system, str) or not isinstance(rec["chat"], str):
        raise BadRecord(NAME, rid, "system", "'system' and 'chat' must be strings")
    system = re.sub(r"^\s*SYSTEM:\s*", "", system)
    tools = concatenated_objects(system)
    if not tools:
        raise BadRecord(NAME, rid, "system", "no tools (a plain chat record)")
    parts = _TURN.split(rec["chat"])
    query: list[dict[str, Any]] = []
    roles = {"USER": "user", "ASSISTANT": "assistant", "FUNCTION RESPONSE": "tool"}
    for k in range(1, len(parts) - 1, 2):
        role, content = roles[parts[k]], parts[k + 1].strip()
        if role == "assistant" and "<functioncall>" in content:
            calls = parse_calls(NAME, rid, "chat", "glaive", content)
            return Sample(NAME, rid, system.strip(), query, tools, calls, "glaive")
        # Raw Glaive ends every assistant turn with the end-of-text marker: history turns lose it.
        query.append({"role": role, "content": content.replace(_EOT, "").strip()})
    raise BadRecord(NAME, rid, "chat", "no function call in the dialogue")


def normalise(rid: str, rec: dict[str, Any]) -> Sample:
    if "conversations" in rec:
        return _sharegpt(rid, rec)
    if "chat" in rec and "system" in rec:
        return _raw(rid, rec)
    raise BadRecord(NAME, rid, "conversations", "neither ShareGPT 'conversations' nor raw 'system'+'chat'")


register(SourceDef(NAME, "glaiveai/glaive-function-calling-v2", "glaive", normalise,
                   local_names=("glaive-function-calling-v2.json", "glaive_toolcall_en_demo.json"),
                   description="Glaive function-calling v2: single calls in <functioncall> {...} <|endoftext|>"))
