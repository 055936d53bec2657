"""ToolACE (``Team-ACE/ToolACE``), wire format ``toolace``: pythonic call lists ``[Func(a="v"), g(b=1)]``.

Record: ``{"system": "<instructions> ... Here is a list of functions in JSON format that you can invoke:\\n[...]",
"conversations": [{"from": "user"|"assistant"|"tool", "value": str}]}``. The tool list is read from the system
prompt; the gold calls are the first assistant turn that is a call list, with every turn before it (including
earlier assistant answers in text and tool results) as the dialogue.

What is skipped, and why (each counted per reason in the build's manifest):
- tool names that Python cannot write as a call (``[Market Trends API(...)]``, ``[/eff-wordlist()]``): the pythonic
  ``toolace`` format has no syntax for them. This is a deliberate filter, the paper's (about half of ToolACE); it
  is not configurable, because the record's system prompt asks for exactly that pythonic syntax;
- records whose tools are not a JSON list but a layout of their own (YAML-like text, Markdown, XML tags, an HTML
  or LaTeX table, ``{"tool_name": ...}`` objects): ToolACE's format-diversity records. Their system prompt also
  defines a call syntax of its own (``<api|{k/'v'}>``, ``{api-(k--"v")}``, ``[api=>(k~v)]``, mostly with unquoted
  values), so their calls cannot be read as typed arguments without guessing;
- records with an empty tool list or none, or whose assistant never calls a tool.
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
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*")
_OWN_LAYOUT = re.compile(r"\btool_name\b")  # every format-diversity layout names its fields so

SPACED_NAMES = "tool name with spaces: the pythonic toolace format cannot write it"
OTHER_NAMES = "tool name with characters other than letters, digits, '_' and '.': the toolace format cannot write it"
NAME_POLICY = ("the paper's filter, kept on purpose: such names have no pythonic call syntax, and the record's own "
               "system prompt asks for that syntax; not configurable")


def _tools(rid: str, system: str) -> list[dict[str, Any]]:
    found = embedded_json(system, "[", list)
    if found is not None and found[0] and all(isinstance(t, dict) and "name" in t for t in found[0]):
        return found[0]
    if _OWN_LAYOUT.search(system):
        raise BadRecord(NAME, rid, "system", "tools in a layout of the record's own (YAML-like, Markdown, XML, a table "
                        "or tool_name objects) with a call syntax of its own, not the toolace format")
    if found is not None and found[0] == []:
        raise BadRecord(NAME, rid, "system", "empty tool list (nothing to call)")
    raise BadRecord(NAME, rid, "system", "no tool list in the system prompt")


def call_names(text: str) -> list[str] | None:
    """The names of the calls in a pythonic list ``[a(...), b c(...)]``, read without parsing the arguments, so
    that names Python cannot parse are found too (a name may hold parentheses: the argument list is the group
    followed by ``,`` or ``]``); ``None`` when ``text`` is not shaped like a call list."""
    t = text.strip()
    if not t.startswith("["):
        return None
    names: list[str] = []
    i, n = 1, len(t)
    while i < n and t[i].isspace():
        i += 1
    if i < n and t[i] == "]" and not t[i + 1 :].strip():
        return names
    start = i
    while True:
        j = i
        while j < n and t[j] not in "(,[]\n":
            j += 1
        if j >= n or t[j] != "(" or not t[start:j].strip():
            return None
        k = _group_end(t, j)
        if k is None:
            return None
        i = k + 1
        while i < n and t[i].isspace():
            i += 1
        if i < n and t[i] in ",]":  # that group was the argument list
            names.append(t[start:j].strip())
            if t[i] == "]":
                return names if not t[i + 1 :].strip() else None
            i += 1
            while i < n and t[i].isspace():
                i += 1
            start = i


def _group_end(t: str, j: int) -> int | None:
    """Index of the bracket closing the one at ``t[j]``, skipping quoted strings; None if it never closes."""
    depth, quote, k = 0, "", j
    while k < len(t):
        c = t[k]
        if quote:
            if c == "\\":
                k += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return k
        k += 1
    return None


def _calls(rid: str, fld: str, value: str):
    try:
        return parse_calls(NAME, rid, fld, "toolace", value)
    except BadRecord as e:
        names = call_names(value) or []
        if any(" " in nm for nm in names):
            raise BadRecord(NAME, rid, fld, SPACED_NAMES, policy=NAME_POLICY) from None
        if any(not _IDENTIFIER.fullmatch(nm) for nm in names):
            raise BadRecord(NAME, rid, fld, OTHER_NAMES, policy=NAME_POLICY) from None
        raise e from None


def normalise(rid: str, rec: dict[str, Any]) -> Sample:
    system = rec.get("system")
    if not isinstance(system, str) or not system.strip():
        raise BadRecord(NAME, rid, "system", "missing or not a string")
    tools = _tools(rid, system)
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
        value = turn["value"].strip()
        if role == "assistant" and value.startswith("["):
            calls = _calls(rid, f"conversations[{k}].value", value)
            if not any(m["role"] == "user" for m in query):
                raise BadRecord(NAME, rid, "conversations", "no user turn before the tool call")
            return Sample(NAME, rid, system.strip(), query, tools, calls, "toolace")
        query.append({"role": role, "content": turn["value"]})
    raise BadRecord(NAME, rid, "conversations", "no tool call in any assistant turn (answers in text only)")


register(SourceDef(NAME, "Team-ACE/ToolACE", "toolace", normalise, local_names=("data.json",),
                   description="ToolACE: pythonic call lists [f(a=1), g(b='x')] in <function_list> tags"))
