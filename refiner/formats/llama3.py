"""Llama 3.1 / 3.2 / 3.3 JSON tool calls: a spelling of the JSON-calls grammar's ``"joined"`` payload
(:mod:`refiner.formats.json_calls`), the catalog's row ``llama3_json`` (Meta's chat templates, vLLM
``llama_tool_parser.py``).

``{"name": ..., "parameters": {...}}``, optionally after the ``<|python_tag|>`` token, several calls joined by ``;``.
A call object holds ``"parameters"`` (some outputs write ``"arguments"``) and optionally ``"type": "function"``;
rendering writes ``"parameters"``, no tag, and joins calls with ``"; "``. Llama 3.1's built-in tools are a Python
call after the tag, ``<|python_tag|>brave_search.call(query="x")``: read as a call of the tool before ``.call``;
rendering writes a lone call of a built-in tool that way.
"""

from __future__ import annotations

from refiner.formats.json_calls import JsonSpelling

PYTHON_TAG = "<|python_tag|>"
BUILTIN_TOOLS = ("brave_search", "wolfram_alpha")  # the built-ins Meta's template writes as NAME.call(...)

SPELLING = JsonSpelling(PYTHON_TAG, None, "joined", arg_keys=("parameters", "arguments"), between="; ",
                        type_key="type", builtins=BUILTIN_TOOLS)
