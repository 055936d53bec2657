"""Llama 3.1-3.3 JSON tool calls, the catalog's row ``llama3_json``: the JSON-calls grammar's ``"joined"`` payload
(:mod:`refiner.formats.json_calls`). ``{"name": ..., "parameters": {...}}`` (also ``"arguments"``, and
``"type": "function"``), optionally after ``<|python_tag|>``, calls joined by ``;``; the built-in tools are a Python
call after the tag, ``<|python_tag|>brave_search.call(query="x")``.
"""

from __future__ import annotations

from refiner.formats.json_calls import JsonSpelling

PYTHON_TAG = "<|python_tag|>"
BUILTIN_TOOLS = ("brave_search", "wolfram_alpha")  # the built-ins Meta's template writes as NAME.call(...)

SPELLING = JsonSpelling(PYTHON_TAG, None, "joined", arg_keys=("parameters", "arguments"), between="; ",
                        type_key="type", builtins=BUILTIN_TOOLS)
