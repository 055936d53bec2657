"""Tool lists written inside text: JSON (a repeated key never replaces a value by ``null``, for ToolACE), JSON tool
objects inside a glaive or ToolACE system prompt, and the API-Bank prompt's numbered entries (their ``Parameters``
dict read with :func:`ast.literal_eval`).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from refiner.specs.model import SpecError

NO_TOOLS_MARKERS = ("no access to external functions",)
GLAIVE_MARKER = "Use them if required"
# Keys that a tool has and a call ({"name", "arguments"}) does not.
_TOOL_HINTS = ("description", "parameters", "input_schema", "query_parameters", "path_parameters", "output_parameters",
               "output_parameter")


def _keep_non_null(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out and v is None and out[k] is not None:
            continue
        out[k] = v
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_keep_non_null)


def loads(text: str) -> Any:
    """``json.loads`` where a repeated key never replaces a value by ``null``."""
    return _DECODER.decode(text)


def looks_like_tool(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(isinstance(v, dict) and looks_like_tool(v) for v in value)
    if not isinstance(value, dict):
        return False
    if isinstance(value.get("function"), dict) or "api_name" in value:
        return True
    return isinstance(value.get("name"), str) and any(k in value for k in _TOOL_HINTS)


def embedded_json(text: str) -> list[Any]:
    """Every top-level JSON object or list in ``text`` that looks like a tool (or a list of tools), in order."""
    found: list[Any] = []
    pos = 0
    starts = re.compile(r"[\[{]")
    while True:
        m = starts.search(text, pos)
        if m is None:
            return found
        try:
            value, end = _DECODER.raw_decode(text, m.start())
        except (json.JSONDecodeError, RecursionError):
            pos = m.start() + 1
            continue
        if looks_like_tool(value):
            found.append(value)
            pos = end
        else:
            pos = m.start() + 1


_APIBANK_HEADER = re.compile(r"^\s*(\d+)\.\s+(?:Name:\s*(?P<named>\S.*?)|(?P<short>[A-Za-z_][\w.\-]*):\s*(?P<desc>.*?))\s*$")
_APIBANK_PARAMS = re.compile(r"^\s*Parameters:\s*(.*)$")
_APIBANK_DESC = re.compile(r"^\s*Description:\s*(.*)$")
_APIBANK_DETECT = re.compile(r"^\s*\d+\.\s+(?:Name:\s*\S.*|[A-Za-z_][\w.\-]*:.*)\n(?:\s*Description:.*\n)?\s*Parameters:\s*\{",
                             re.MULTILINE)


def is_apibank(text: str) -> bool:
    return bool(_APIBANK_DETECT.search(text))


def _tools_section(text: str) -> str:
    i = text.find("**Available Tools**")
    if i < 0:
        return text
    j = text.find("\n**", i + len("**Available Tools**"))
    return text[i:j] if j >= 0 else text[i:]


def apibank_tools(text: str) -> list[dict[str, Any]]:
    """The tool entries of an API-Bank prompt as ``{"name", "description", "parameters"}`` dicts."""
    lines = _tools_section(text).splitlines()
    tools: list[dict[str, Any]] = []
    i = 0
    while i < len(lines):
        m = _APIBANK_HEADER.match(lines[i])
        if not m:
            i += 1
            continue
        name = (m.group("named") or m.group("short")).strip()
        desc = m.group("desc") or ""
        index = len(tools)
        i += 1
        params_text = None
        while i < len(lines) and not _APIBANK_HEADER.match(lines[i]):
            d = _APIBANK_DESC.match(lines[i])
            p = _APIBANK_PARAMS.match(lines[i])
            if d:
                desc = d.group(1)
            elif p:
                params_text, i = _literal_lines(lines, i, p.group(1))
                continue
            elif lines[i].strip() and params_text is None and desc:
                desc += "\n" + lines[i].strip()
            i += 1
        if params_text is None:
            raise SpecError("apibank", "no 'Parameters:' line", tool=index, name=name, field="Parameters")
        try:
            params = ast.literal_eval(params_text)
        except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
            raise SpecError("apibank", f"not a Python literal: {e}", tool=index, name=name, field="Parameters") from None
        if not isinstance(params, dict):
            raise SpecError("apibank", f"must be a dict, got {type(params).__name__}", tool=index, name=name,
                            field="Parameters")
        tools.append({"name": name, "description": desc.strip(), "parameters": params})
    return tools


def _literal_lines(lines: list[str], i: int, first: str) -> tuple[str, int]:
    """The Python literal starting at ``first`` (line ``i``), extended over following lines until it parses."""
    text = first
    j = i + 1
    while True:
        try:
            ast.literal_eval(text)
            return text, j
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            if j >= len(lines) or _APIBANK_HEADER.match(lines[j]):
                return first, i + 1  # let the caller report the parse error on the first line
            text += "\n" + lines[j]
            j += 1
