"""Every valid JSON Schema a tool list may hold is read (refiner/specs/schema.py, dialects.py), at worst as free-form
parameters with a note, and a request is never refused for it. The schemas are written the way their
sources write them: MCP servers' ``tools/list`` (``inputSchema``, draft-07 ``$schema``, ``annotations``), pydantic /
FastMCP output (``$defs``, ``$ref``, ``anyOf: [{"$ref": ...}, {"type": "null"}]``, ``title`` everywhere), OpenAI
``tools`` with a top-level ``anyOf`` (one of two ways to name the thing)."""

from __future__ import annotations

import json

import pytest

from refiner.calls import ToolCall
from refiner.formats.reading import tool_index
from refiner.gate import check_calls
from refiner.pipeline import Refiner
from refiner.specs import Param, detect_dialect, load_tools
from refiner.specs.schema import MAX_DEPTH, MAX_NODES, normalise

# An MCP filesystem server's tool, as tools/list returns it.
MCP_READ = {
    "name": "read_text_file",
    "title": "Read text file",
    "description": "Read the complete contents of a file as text.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "tail": {"type": "number", "description": "If provided, returns only the last N lines of the file"},
            "head": {"type": "number", "description": "If provided, returns only the first N lines of the file"},
        },
        "required": ["path"],
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "annotations": {"readOnlyHint": True},
}

# A FastMCP tool from a pydantic model: $defs, a nullable reference, titles, an enum through a reference.
MCP_PYDANTIC = {
    "name": "search_issues",
    "description": "Search the tracker.",
    "inputSchema": {
        "$defs": {
            "Filters": {
                "properties": {
                    "state": {"$ref": "#/$defs/State"},
                    "labels": {"items": {"type": "string"}, "title": "Labels", "type": "array"},
                },
                "required": ["state"],
                "title": "Filters",
                "type": "object",
            },
            "State": {"enum": ["open", "closed"], "title": "State", "type": "string"},
        },
        "properties": {
            "query": {"title": "Query", "type": "string"},
            "filters": {"anyOf": [{"$ref": "#/$defs/Filters"}, {"type": "null"}], "default": None},
            "limit": {"default": 10, "title": "Limit", "type": "integer"},
        },
        "required": ["query"],
        "title": "search_issuesArguments",
        "type": "object",
    },
    "outputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]},
}

# OpenAI tools whose parameters are a top-level combinator.
ANY_OF = {"type": "function", "function": {"name": "lookup_user", "description": "By e-mail or by id.", "parameters": {
    "anyOf": [
        {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}, "required": ["email"],
         "additionalProperties": False},
        {"type": "object", "properties": {"user_id": {"type": "integer"}}, "required": ["user_id"],
         "additionalProperties": False},
    ]}}}
ONE_OF = {"name": "geocode", "parameters": {
    "type": "object",
    "properties": {"address": {"type": "string"}, "lat": {"type": "number"}, "lon": {"type": "number"}},
    "oneOf": [{"required": ["address"]}, {"required": ["lat", "lon"]}]}}
ALL_OF = {"name": "book", "parameters": {
    "$defs": {"Base": {"type": "object", "properties": {"hotel": {"type": "string"}}, "required": ["hotel"]}},
    "allOf": [{"$ref": "#/$defs/Base"},
              {"type": "object", "properties": {"nights": {"type": "integer", "minimum": 1}}, "required": ["nights"]}]}}
RECURSIVE = {"name": "make_tree", "inputSchema": {"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}},
                                                  "$defs": {"Node": {"type": "object", "properties": {
                                                      "label": {"type": "string"},
                                                      "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}}}
FREE = {"name": "kv_put", "inputSchema": {"type": "object", "additionalProperties": {"type": "string"}}}
PATTERN = {"name": "set_env", "parameters": {"type": "object", "patternProperties": {"^[A-Z_]+$": {"type": "string"}}}}
TRUE_PARAMS = {"name": "anything", "parameters": True}
NOT_OBJECT = {"name": "echo", "parameters": {"type": "string"}}
DEFINITIONS = {"name": "scale", "parameters": {"type": "object", "definitions": {"Factor": {"type": "number",
                                                                                         "exclusiveMinimum": 0}},
                                               "properties": {"factor": {"$ref": "#/definitions/Factor"}}}}
TYPE_LISTS = {"name": "put", "parameters": {"type": ["object", "null"], "properties": {
    "n": {"type": ["integer", "number"]}, "s": {"type": ["string", "null"]}, "any": {"type": ["string", "integer"]},
    "v": {"anyOf": [{"type": "integer"}, {"type": "number"}, {"type": "null"}]}, "mode": {"const": "fast"},
    "flag": True, "list": {"type": "array", "items": True}, "gone": {"$ref": "https://example.com/schemas/x.json"}}}}
VALID = [MCP_READ, MCP_PYDANTIC, ANY_OF, ONE_OF, ALL_OF, RECURSIVE, FREE, PATTERN, TRUE_PARAMS, NOT_OBJECT, DEFINITIONS,
         TYPE_LISTS]


def _one(tool):
    (spec,) = load_tools([tool])
    return spec


def test_an_mcp_tool_is_read_from_its_input_schema():
    spec = _one(MCP_READ)
    assert spec.dialect == "mcp" and detect_dialect([MCP_READ]) == "mcp"
    assert spec.params == {"path": Param(type="string"),
                           "tail": Param(type="number", description=MCP_READ["inputSchema"]["properties"]["tail"][
                               "description"]),
                           "head": Param(type="number", description=MCP_READ["inputSchema"]["properties"]["head"][
                               "description"])}
    assert spec.required == ("path",) and spec.extra["additionalProperties"] is False
    assert spec.extra["annotations"] == {"readOnlyHint": True} and spec.extra["title"] == "Read text file"
    assert not spec.notes and not spec.free_form


def test_references_and_definitions_are_resolved():
    spec = _one(MCP_PYDANTIC)
    filters = spec.params["filters"]
    assert filters.type == "object" and filters.nullable and filters.required == ("state",)
    assert filters.properties["state"].enum == ("open", "closed") and filters.properties["state"].type == "string"
    assert filters.properties["labels"].type == "array" and filters.properties["labels"].items == Param(type="string")
    assert spec.params["limit"].default == 10 and spec.required == ("query",)
    assert spec.outputs["count"].type == "integer"
    assert _one(DEFINITIONS).params["factor"].type == "number"
    assert not spec.notes


@pytest.mark.parametrize("tool, required, names", [
    (ANY_OF, (), {"email", "user_id"}),
    (ONE_OF, (), {"address", "lat", "lon"}),
    (ALL_OF, ("hotel", "nights"), {"hotel", "nights"}),
])
def test_top_level_combinators_are_read_not_refused(tool, required, names):
    spec = _one(tool)
    assert set(spec.params) == names and spec.required == required
    if tool is not ALL_OF:  # alternatives merged: said so
        assert spec.notes and "alternative" in spec.notes[0]
    assert not spec.free_form


def test_a_call_to_either_alternative_passes_the_gate_with_a_spec_warning():
    index = tool_index(load_tools([ANY_OF]))
    for args in ({"email": "a@b.c"}, {"user_id": 7}):
        diags = check_calls([ToolCall("lookup_user", args)], index)
        assert [d.code for d in diags] == ["spec"] and diags[0].severity == "warning", diags
    diags = check_calls([ToolCall("lookup_user", {"user_id": "seven"})], index)
    assert {d.code for d in diags} == {"spec", "type"}  # the alternatives' types are still checked


def test_recursive_references_are_bounded_and_noted():
    spec = _one(RECURSIVE)
    root = spec.params["root"]
    assert root.type == "object" and root.properties["children"].type == "array"
    assert root.properties["children"].items == Param()  # where the reference repeats: any value
    assert any("recursive reference" in n for n in spec.notes)


@pytest.mark.parametrize("tool", [FREE, PATTERN, TRUE_PARAMS, NOT_OBJECT])
def test_schemas_naming_no_parameters_read_as_free_form_with_a_note(tool):
    spec = _one(tool)
    assert spec.free_form and spec.notes and "free-form" in spec.notes[0]
    diags = check_calls([ToolCall(spec.name, {"ANY_NAME": "x", "other": "y"})], tool_index([spec]))
    assert [d.code for d in diags] == ["spec"]  # its arguments are not refused by name
    again = _one(spec.to_json_schema())  # written back as a schema that accepts any argument
    assert again.free_form


def test_type_lists_boolean_schemas_const_and_remote_references():
    p = _one(TYPE_LISTS).params
    assert p["n"].type == "number" and p["s"] == Param(type="string", nullable=True)
    assert p["any"].type is None
    assert p["v"].type == "number" and p["v"].nullable
    assert p["mode"].enum == ("fast",) and p["mode"].type == "string"
    assert p["flag"] == Param() and p["list"].items == Param()
    assert p["gone"].type is None
    assert any("points at no schema" in n for n in _one(TYPE_LISTS).notes)


def test_a_closed_false_schema_takes_no_argument():
    spec = _one({"name": "ping", "parameters": False})
    assert spec.params == {} and spec.extra.get("additionalProperties") is False and not spec.free_form


@pytest.mark.parametrize("tool", VALID, ids=lambda t: t.get("name") or t["function"]["name"])
def test_the_pipeline_never_refuses_a_request_for_a_valid_schema(tool):
    name = tool.get("name") or tool["function"]["name"]
    upstream = f'<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>'
    res = Refiner().refine({"upstream": upstream, "tools": [tool]})
    assert res["stage"] != "error" and res["calls"] == [{"name": name, "arguments": {}}]
    assert json.dumps(res)  # JSON-safe


def test_the_round_trip_keeps_what_was_read():
    for tool in (MCP_READ, MCP_PYDANTIC, ALL_OF, ONE_OF, DEFINITIONS):
        spec = _one(tool)
        assert load_tools([spec.to_json_schema()]) == [spec]


def test_huge_and_deeply_referencing_schemas_are_bounded():
    chain = {f"D{i}": {"$ref": f"#/$defs/D{i + 1}"} for i in range(50)}
    chain["D50"] = {"type": "integer"}
    deep = _one({"name": "deep", "parameters": {"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}},
                                                "$defs": chain}})
    assert deep.params["x"].type is None and deep.notes  # more references inside one another than are followed
    fan = {f"D{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/D{i + 1}"},
                                                       "b": {"$ref": f"#/$defs/D{i + 1}"}}} for i in range(30)}
    fan["D30"] = {"type": "string"}
    _, notes, _ = normalise({"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": fan})
    assert any(str(MAX_NODES) in n for n in notes)  # 2**30 expansions stop at the node bound
    wide = _one({"name": "wide", "parameters": {"type": "object", "properties": {
        f"p{i}": {"type": "string"} for i in range(5000)}}})
    assert len(wide.params) > 0


@pytest.mark.parametrize("via", ["properties", "items", "nullable anyOf", "properties under $defs", "oneOf",
                                 "type text"])
def test_a_schema_nested_thousands_deep_is_read_to_the_depth_the_gate_checks(via):
    def nest(depth: int, leaf: dict) -> dict:
        if via == "type text":
            return {"type": "List[" * depth + leaf["type"] + "]" * depth}
        schema = leaf
        for _ in range(depth):
            if via == "items":
                schema = {"type": "array", "items": schema}
            elif via == "nullable anyOf":
                schema = {"anyOf": [{"type": "object", "properties": {"a": schema}}, {"type": "null"}]}
            elif via == "oneOf":
                schema = {"oneOf": [{"type": "object", "properties": {"a": schema}}, {"type": "string"}]}
            else:
                schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
        return schema

    def value(depth: int, leaf):
        for _ in range(depth):
            leaf = [leaf] if via in ("items", "type text") else {"a": leaf}
        return leaf

    for depth in (5, 5000):
        params = {"type": "object", "properties": {"x": nest(depth, {"type": "integer"})}}
        if via == "properties under $defs":
            params["$defs"] = {}
        spec = _one({"name": "f", "parameters": params})  # (a RecursionError before the depth bound)
        noted = any(f"more than {MAX_DEPTH} deep" in n for n in spec.notes)
        assert noted == (depth > MAX_DEPTH) or via == "type text"  # (a type text's unknown part is read as any)
        tools = tool_index([spec])
        # a wrong leaf is found where the gate looks, and not below it
        shallow = check_calls([ToolCall("f", {"x": value(3, "not a number")})], tools)
        assert [d.code for d in shallow if d.severity == "error"] or via == "oneOf"
        deep_wrong = check_calls([ToolCall("f", {"x": value(depth, "not a number")})], tools)
        checked = depth <= MAX_DEPTH and via != "oneOf"  # (alternatives of two types: the gate checks no type)
        assert bool([d for d in deep_wrong if d.severity == "error"]) == checked
