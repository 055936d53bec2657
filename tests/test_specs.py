"""Tool-spec normaliser on small hand-written records in each dialect, the renderings, round trips and errors."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest

from refiner.specs import (
    JSON_TYPES,
    Param,
    SpecError,
    ToolSpec,
    detect_dialect,
    load_tools,
    parse_type,
    render_tool_list,
    to_openai_tools,
)

OPENAI_FN = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name", "minLength": 1, "maxLength": 80},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "days": {"type": ["integer", "null"], "minimum": 1, "maximum": 14},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
            "where": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"],
                "additionalProperties": False,
            },
        },
        "required": ["city"],
    },
}


def test_openai_function_and_tool_shapes() -> None:
    (fn,) = load_tools([OPENAI_FN])
    (tool,) = load_tools([{"type": "function", "function": OPENAI_FN}])
    assert fn == tool
    assert detect_dialect([OPENAI_FN]) == "jsonschema"
    assert detect_dialect([{"type": "function", "function": OPENAI_FN}]) == "openai"
    assert fn.name == "get_weather" and fn.required == ("city",)
    city, unit, days, tags, where = (fn.params[k] for k in ("city", "unit", "days", "tags", "where"))
    assert (city.type, city.min_length, city.max_length, city.description) == ("string", 1, 80, "City name")
    assert unit.enum == ("c", "f") and unit.has_default and unit.default == "c"
    assert (days.type, days.nullable, days.minimum, days.maximum) == ("integer", True, 1, 14)
    assert tags.type == "array" and tags.items == Param(type="string", pattern="^[a-z]+$")
    assert where.type == "object" and where.required == ("lat", "lon")
    assert where.properties["lat"] == Param(type="number")
    assert where.extra == {"additionalProperties": False}


def test_anthropic_input_schema() -> None:
    tool = {"name": "get_weather", "description": "Current weather for a city.", "input_schema": OPENAI_FN["parameters"]}
    (spec,) = load_tools(tool)
    assert detect_dialect(tool) == "anthropic" and spec.dialect == "anthropic"
    assert spec == load_tools([OPENAI_FN])[0]


def test_toolace_text_with_misplaced_required_and_null() -> None:
    # The shape of the ToolACE system prompt (paper Appendix B.2): "type": "dict", python-ish types, and "required"
    # at the tool level followed by "required": null (a duplicate key) — the list must survive.
    system = (
        "You are an expert in composing functions. Here is a list of functions in JSON format that you can invoke: "
        '[{"name": "Fundamentals", "description": "ROA of a share.", "parameters": {"type": "dict", "properties": '
        '{"shareuid": {"description": "Share id", "type": "int"}, "from": {"description": "Start", "type": "string"},'
        ' "ratio": {"type": "float"}, "codes": {"type": "list", "items": {"type": "str"}}}}, '
        '"required": ["shareuid", "from"], "required": null}, '
        '{"name": "Currencies", "description": "Supported currencies.", "parameters": {"type": "dict", '
        '"properties": {}, "required": []}, "required": null}, '
        '{"name": "watchlists", "description": "Watchlists.", "parameters": {"type": "dict", "properties": '
        '{"callback": {"description": "cb", "type": "string", "default": ""}}}, "required": ["callback"], '
        '"required": null}]. Should you decide to return the function call(s), put it in the format [func(a=1)].'
    )
    assert detect_dialect(system) == "toolace"
    fund, cur, watch = load_tools(system)
    assert fund.dialect == "toolace" and fund.required == ("shareuid", "from")
    assert [fund.params[k].type for k in ("shareuid", "from", "ratio", "codes")] == ["integer", "string", "number",
                                                                                   "array"]
    assert fund.params["shareuid"].raw_type == "int"
    assert fund.params["codes"].items == Param(type="string")
    assert cur.params == {} and cur.required == ()
    assert watch.required == ("callback",) and watch.params["callback"].has_default
    assert watch.params["callback"].default == ""


def test_xlam_flat_parameters_and_optional() -> None:
    record = {
        "id": 7,
        "query": "Where can I find live giveaways?",
        "answers": "[]",
        "tools": json.dumps([{
            "name": "live_giveaways_by_type",
            "description": "Live giveaways by type.",
            "parameters": {
                "type": {"description": "Giveaway type.", "type": "str", "default": "game"},
                "limit": {"description": "Max results.", "type": "int, optional", "default": 10},
                "ids": {"description": "Ids.", "type": "List[int]"},
                "filters": {"description": "Filters.", "type": "Dict[str, Any], optional"},
                "scale": {"description": "Scale.", "type": "Union[int, float]"},
                "note": {"description": "Note.", "type": "Optional[str]", "default": None},
                "mode": {"description": "Mode.", "type": "Literal['a', 'b']"},
                "pairs": {"description": "Pairs.", "type": "List[Tuple[str, int]]"},
            },
        }]),
    }
    (spec,) = load_tools(record)
    assert spec.dialect == "xlam" and detect_dialect(json.loads(record["tools"])) == "xlam"
    p = spec.params
    assert spec.required == ("type", "ids", "scale", "note", "mode", "pairs")
    assert p["type"].type == "string" and p["type"].default == "game" and p["type"].description == "Giveaway type."
    assert p["limit"].type == "integer" and p["limit"].default == 10 and p["limit"].raw_type == "int, optional"
    assert p["ids"].type == "array" and p["ids"].items == Param(type="integer")
    assert p["filters"].type == "object"
    assert p["scale"].type == "number"
    assert p["note"].type == "string" and p["note"].nullable and p["note"].has_default and p["note"].default is None
    assert p["mode"].type == "string" and p["mode"].enum == ("a", "b")
    assert p["pairs"].type == "array" and p["pairs"].items.type == "array" and p["pairs"].items.items is None


def test_bfcl_shape() -> None:
    fn = {
        "name": "calculate_distance",
        "description": "Distance between two GPS coordinates.",
        "parameters": {
            "type": "dict",
            "properties": {
                "coord1": {"type": "tuple", "items": {"type": "float"}, "description": "(lat, lon)"},
                "unit": {"type": "string", "enum": ["miles", "km"], "default": "km"},
                "obj": {"type": "any"},
                "params": {"type": "HashMap"},
                "when": {"type": "string", "optional": "yes"},
                "nested": {"type": "dict", "properties": {"a": {"type": "long"}}, "required": ["a"]},
            },
            "required": ["coord1"],
        },
    }
    (spec,) = load_tools({"id": "simple_1", "question": [], "function": [fn]})
    assert spec.dialect == "bfcl" and spec.required == ("coord1",)
    assert spec.params["coord1"].type == "array" and spec.params["coord1"].items == Param(type="number")
    assert spec.params["unit"].enum == ("miles", "km") and spec.params["unit"].default == "km"
    assert spec.params["obj"].type is None and spec.params["obj"].raw_type == "any"
    assert spec.params["params"].type == "object"
    assert spec.params["nested"].properties["a"].type == "integer" and spec.params["nested"].required == ("a",)


def test_nestools_and_nestful_shapes() -> None:
    api = {
        "api_name": "scan_isbn",
        "api_description": "Scan the ISBN of a book.",
        "parameters": {"isbn": {"type": "str", "description": "the ISBN"}, "fast": {"type": "bool", "description": ""}},
        "required": ["isbn"],
        "responses": {"book_details": {"type": "str", "description": "details"},
                      "availability": {"type": "bool", "description": "available"}},
    }
    (spec,) = load_tools([api])
    assert spec.dialect == "nestools" and spec.name == "scan_isbn" and spec.description == "Scan the ISBN of a book."
    assert spec.required == ("isbn",) and spec.params["fast"].type == "boolean"
    assert list(spec.outputs) == ["book_details", "availability"] and spec.outputs["availability"].type == "boolean"

    sgd = {
        "name": "Buses.FindBus",
        "description": "Find a bus.",
        "arguments": {
            "origin": {"description": "From", "required": True, "allowed_values": []},
            "group_size": {"description": "Size", "required": False, "default_value": "1",
                           "allowed_values": ["1", "2"]},
            "page": {"type": "Number", "allowed_values": "1-100", "optional": True},
        },
        "output_parameters": {"price": {"description": "Price", "possible_values": []}},
    }
    (spec,) = load_tools([sgd])
    assert spec.dialect == "nestful" and spec.required == ("origin",)
    assert spec.params["origin"] == Param(description="From")
    gs = spec.params["group_size"]
    assert (gs.type, gs.enum, gs.default) == ("string", ("1", "2"), "1")
    assert (spec.params["page"].type, spec.params["page"].minimum, spec.params["page"].maximum) == ("number", 1, 100)
    assert spec.outputs == {"price": Param(description="Price")}


def test_apibank_text_both_header_styles() -> None:
    text = (
        "**Available Tools**\nIn your response, you can use the following tools:\n"
        "1. Name: QueryHealthData\nDescription: Health data of a user.\n"
        "Parameters: {'user_id': {'type': 'str', 'description': \"The user's id.\"}, "
        "'tags': {'type': 'list(str)', 'description': 'Tags.'}}\n"
        "2. QueryMeeting: The API for retrieving meetings.\nParameters: {'user_name': {'type': 'str', "
        "'description': 'Name of the user.'}}\n\n**Steps for Each Turn**\n1. **Think:** Recall context.\n"
    )
    assert detect_dialect(text) == "apibank"
    health, meeting = load_tools(text)
    assert health.name == "QueryHealthData" and health.description == "Health data of a user."
    assert health.required == ("user_id", "tags")
    assert health.params["user_id"].description == "The user's id."
    assert health.params["tags"].type == "array" and health.params["tags"].items == Param(type="string")
    assert meeting.name == "QueryMeeting" and meeting.description == "The API for retrieving meetings."
    assert meeting.params["user_name"].type == "string"


def test_glaive_no_tools_text() -> None:
    assert load_tools("SYSTEM: You are a helpful assistant, with no access to external functions.") == []


@pytest.mark.parametrize(
    ("text", "jtype", "nullable", "optional"),
    [
        ("str", "string", False, False),
        ("int, optional", "integer", False, True),
        ("List[str]", "array", False, False),
        ("Dict[str, Any]", "object", False, False),
        ("Union[int, float]", "number", False, False),
        ("int or float", "number", False, False),
        ("Optional[List[int]]", "array", True, False),
        ("Union[str, None]", "string", True, False),
        ("String", "string", False, False),
        ("ArrayList", "array", False, False),
        ("double", "number", False, False),
        ("Date (yyyy-mm-dd)", "string", False, False),
        ("list of floats", "array", False, False),
        ("Union[str, int]", None, False, False),
        ("any", None, False, False),
        ("Callable", None, False, False),
    ],
)
def test_parse_type(text: str, jtype: str | None, nullable: bool, optional: bool) -> None:
    info = parse_type(text)
    assert (info.type, info.nullable, info.optional) == (jtype, nullable, optional)


def test_a_bare_type_name_reads_as_the_general_reader_reads_it() -> None:
    """A type text that is exactly a known type name is read by a short path; padded or capitalised, the same name
    goes the general way: the same reading."""
    from refiner.specs.types import _SIMPLE

    for name in _SIMPLE:
        assert parse_type(name) == parse_type(f" {name} ") == parse_type(name.upper()), name
        assert vars(parse_type(name)) == vars(parse_type(f" {name}\n"))


def test_parse_type_items_and_unknown() -> None:
    assert parse_type("list of floats").items.type == "number"
    assert parse_type("Tuple[int, str]").items is None
    assert parse_type("Set[int]").items.type == "integer"
    assert not parse_type("Frobnicator").known and parse_type("any").known and parse_type("Callable").known


def test_renderings() -> None:
    specs = load_tools([OPENAI_FN])
    tools = to_openai_tools(specs)
    assert tools[0]["type"] == "function" and tools[0]["function"]["name"] == "get_weather"
    assert tools[0]["function"]["parameters"]["required"] == ["city"]
    assert tools[0]["function"]["parameters"]["properties"]["days"]["type"] == ["integer", "null"]
    text = render_tool_list(specs)
    assert "\n" not in text and json.loads(text) == [specs[0].to_json_schema()]
    with_out = ToolSpec("f", outputs={"r": Param(type="string")})
    assert "output_parameters" in with_out.to_json_schema()
    assert "output_parameters" not in to_openai_tools([with_out])[0]["function"]
    assert load_tools(render_tool_list([with_out])) == [with_out]


# --------------------------------------------------------------------------------------------------------------
# Errors


def _err(obj, dialect=None) -> SpecError:
    with pytest.raises(SpecError) as ei:
        load_tools(obj, dialect)
    return ei.value


def test_unrecognised_dialect_is_a_clear_error() -> None:
    e = _err([OPENAI_FN, {"tool": "x", "args": {}}])
    assert e.tool == 1 and "cannot recognise" in str(e) and "known dialects" in str(e)
    e = _err("just some prose with no tools in it")
    assert "no tool specs found" in str(e)
    with pytest.raises(SpecError, match="cannot recognise"):
        detect_dialect({"tool": "x"})
    with pytest.raises(SpecError, match="mix dialects"):
        detect_dialect([OPENAI_FN, {"api_name": "a", "parameters": {}}])
    assert "unknown dialect" in str(_err([OPENAI_FN], "yaml"))


def test_bad_specs_name_dialect_tool_and_field() -> None:
    e = _err([OPENAI_FN, {"name": "f", "parameters": {"x": {"type": 5}}}])
    assert (e.dialect, e.tool, e.name, e.field) == ("xlam", 1, "f", "parameters.x.type")
    assert str(e).startswith("[xlam] tool 1 'f', field 'parameters.x.type'")
    e = _err([{"api_name": 3, "parameters": {}}])
    assert (e.dialect, e.tool, e.field) == ("nestools", 0, "api_name")
    e = _err([{"name": "g", "parameters": {"type": "object", "properties": {"a": {"type": "string"}},
                                            "required": "a"}}])
    assert (e.dialect, e.name, e.field) == ("jsonschema", "g", "parameters.required")
    e = _err([{"name": "h", "parameters": {"type": "object", "properties": {"a": {"minimum": "low"}}}}])
    assert e.field == "parameters.properties.a.minimum"
    e = _err("**Available Tools**\n1. Name: Broken\nDescription: d\nParameters: {'a': {'type': 'str'\n")
    assert (e.dialect, e.name, e.field) == ("apibank", "Broken", "Parameters")
    e = _err([{"name": "k", "description": 5}])
    assert e.field == "description" and e.name == "k"


# --------------------------------------------------------------------------------------------------------------
# Round trip: normalise → to_json_schema → load_tools


def test_round_trip_hand_written() -> None:
    for specs in (load_tools([OPENAI_FN]), load_tools(json.loads(json.dumps([
        {"name": "x", "description": "", "parameters": {"a": {"type": "List[Optional[int]], optional"}}}])))):
        again = load_tools([s.to_json_schema() for s in specs])
        assert again == specs
        assert load_tools(to_openai_tools(specs)) == [ToolSpec(s.name, s.description, s.params, s.required)
                                                      for s in specs]


hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=6)
_scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | st.floats(allow_nan=False, allow_infinity=False,
                                                                             width=32) | st.text(max_size=6)
_values = st.recursive(_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(_names, c, max_size=3),
                       max_leaves=6)
_maybe_num = st.none() | st.integers(-100, 100) | st.floats(-1e6, 1e6, allow_nan=False)
_maybe_len = st.none() | st.integers(0, 50)


def _param_strategy(children):
    return st.builds(
        Param,
        type=st.sampled_from((*JSON_TYPES, None)),
        enum=st.none() | st.lists(_scalars, max_size=3).map(tuple),
        default=_values,
        has_default=st.booleans(),
        description=st.none() | st.text(max_size=10),
        items=st.none() | children,
        properties=st.dictionaries(_names, children, max_size=3),
        required=st.lists(_names, unique=True, max_size=3).map(tuple),
        minimum=_maybe_num,
        maximum=_maybe_num,
        pattern=st.none() | st.sampled_from(["^a$", "[0-9]+"]),
        min_length=_maybe_len,
        max_length=_maybe_len,
        nullable=st.booleans(),
        format=st.none() | st.sampled_from(["date", "email"]),
        extra=st.dictionaries(st.sampled_from(["example", "minItems", "x-note", "additionalProperties"]), _values,
                              max_size=2),
    )


_params = st.recursive(_param_strategy(st.just(Param())), _param_strategy, max_leaves=3)
_specs = st.builds(
    ToolSpec,
    name=_names,
    description=st.text(max_size=12),
    params=st.dictionaries(_names, _params, max_size=3),
    required=st.lists(_names, unique=True, max_size=3).map(tuple),
    outputs=st.dictionaries(_names, _params, max_size=2),
)


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(st.lists(_specs, min_size=1, max_size=3))
def test_round_trip_property(specs: list[ToolSpec]) -> None:
    assert load_tools([s.to_json_schema() for s in specs]) == specs
    assert load_tools(render_tool_list(specs)) == specs


def _fields(param: Param) -> dict:
    """Every field of a parameter, those its equality leaves out too."""
    return {f.name: getattr(param, f.name) for f in dataclasses.fields(param)}


@pytest.mark.parametrize("dialect", ["openai", "glaive", "nestful"])
@pytest.mark.parametrize("ptype", ["string", "integer", "number", "boolean", "String", "int", "object", "array", "null",
                                   5, None, "string, optional", ["string", "null"]])
@pytest.mark.parametrize("desc", [None, "a city", "", 5])
def test_a_plain_parameter_reads_as_the_general_reader_reads_it(monkeypatch, dialect, ptype, desc):
    """``{"type": T, "description": D}`` (most parameters) is read by a short path: the same Param, flags and error
    as the general reader, for every plain and non-plain type and description."""
    from refiner.specs import dialects

    value = {} if ptype is None else {"type": ptype}
    if desc is not None:
        value["description"] = desc

    def read():
        try:
            got = dialects.read_param(dialects.Ctx(dialect, 0, "f"), "p", dict(value))
            return got, _fields(got[0])  # (every field, those left out of == too)
        except Exception as e:  # noqa: BLE001 - the error, compared by type and text
            return type(e).__name__, str(e)

    short = read()
    monkeypatch.setattr(dialects, "_plain_param", lambda value, depth=0: None)
    assert read() == short


NULLABLE_AND_NESTED = [
    {"type": ["integer", "null"]}, {"type": ["null", "string"], "description": "or none", "default": None},
    {"type": ["array", "null"], "items": {"type": ["number", "null"]}}, {"type": ["string", "null"], "nullable": False},
    {"type": ["string", "string"]}, {"type": ["null", "null"]}, {"type": ["string", 5]}, {"type": ["str", "null"]},
    {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 5},
    {"anyOf": [{"type": "null"}, {"type": "string", "enum": ["a"], "description": "inner"}], "enum": ["b"]},
    {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "nullable": True},
    {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, {"type": "null"}]},
    {"anyOf": [{"type": "object"}, {"type": "null", "description": "none"}]},
    {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}, {"anyOf": [{"type": "null"}] * 2},
    {"anyOf": [{"type": "string"}, {"type": "null"}], "type": "string"},
    {"anyOf": [{"type": "string"}, {"type": "null"}], "items": {"type": "string"}},
    {"anyOf": [{"type": "str"}, {"type": "null"}]}, {"anyOf": [{"type": "string"}, {"type": "null"}], "nullable": 1},
    {"type": "object", "properties": {"site": {"type": "string"}, "tags": {"type": "array", "items": {
        "type": "string"}}, "deep": {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}},
     "required": ["site", "site", "other"]},
    {"type": "object", "properties": {"a": {"type": "string", "required": True}}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": [1]},
    {"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}}, {"type": "object", "properties": []},
    {"type": "string", "properties": {"a": {"type": "string"}}}, {"type": "object", "required": []},
    {"type": "string", "description": None}, {"type": "string", "nullable": None}, {"type": "string", "title": "T"},
    {"type": "object", "default": {"a": 1}}, {"type": "string", "default": None}, {"anyOf": None},
    {"anyOf": [{"type": "string"}, {"type": "null"}], "type": None}, {"type": "string", "enum": ["a", {"b": 1}]},
    {"type": "string", "enum": ["a", "b"], "default": "a", "description": "d", "nullable": True},
    {"type": "array", "items": {"type": "string", "examples": ["x"]}}, {"type": "array", "items": None},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["b", "a", "b"]},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", 1]},
]


@pytest.mark.parametrize("dialect", ["openai", "nestful", "xlam"])
@pytest.mark.parametrize("value", NULLABLE_AND_NESTED)
def test_a_nullable_or_nested_parameter_reads_as_the_general_reader_reads_it(monkeypatch, dialect, value):
    """Type lists with ``null``, ``anyOf`` a schema and null, and nested properties: the short path gives the
    general reader's Param (every field, nested ones too) and flags, or leaves the schema to it."""
    from refiner.specs import dialects

    def read():
        try:
            got = dialects.read_param(dialects.Ctx(dialect, 0, "f"), "p", value)
            return got, repr(_fields(got[0]))  # (every field, nested ones too, those left out of == too)
        except Exception as e:  # noqa: BLE001 - the error, compared by type and text
            return type(e).__name__, str(e)

    short = read()
    monkeypatch.setattr(dialects, "_plain_param", lambda value, depth=0: None)
    assert read() == short


def _whole(spec: ToolSpec) -> tuple:
    """A spec with the fields its equality leaves out."""
    return spec, spec.dialect, spec.extra, spec.notes, spec.free_form, [
        (p.has_default, p.raw_type, p.extra) for p in spec.params.values()]


PLAIN_TOOLS = [
    {"type": "function", "function": {"name": "find_room", "parameters": {"type": "object", "properties": {
        "floor": {"type": "integer"}, "wing": {"type": "string", "enum": ["east", "west"], "description": "Side"},
        "quiet": {"type": "boolean", "default": None}, "budget": {"type": "number", "default": 40}},
        "required": ["floor", "floor", "missing"]}}},
    {"name": "ping", "description": "", "parameters": {"type": "object", "properties": {}, "additionalProperties": False}},
    {"name": "ping"},
    {"type": "function", "function": {"name": "log", "description": "Write a line.", "parameters": {
        "type": "object", "properties": {"line": {"type": "string"}}, "required": []}}},
    {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": ["integer", "null"]}, "page": {"anyOf": [
            {"type": "integer"}, {"type": "null"}], "default": None}, "filters": {"type": "object", "properties": {
                "site": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}}},
        "required": ["query"]}},
    {"name": "note", "description": None, "parameters": None},
    {"name": "tag", "parameters": {"type": "object", "required": ["a"], "additionalProperties": False,
                                   "properties": {"a": {"type": "string", "enum": ["x"], "default": "x",
                                                        "description": "the tag", "nullable": True}}}},
]
NOT_PLAIN_TOOLS = [
    {"name": "book", "parameters": {"type": "object", "properties": {
        "guests": {"type": "array", "items": {"type": "string"}}, "where": {"type": "object", "properties": {
            "town": {"type": "string", "minLength": 2}}, "required": ["town"]}, "notes": {"type": "object"},
        "seat": {"type": ["string", "null"], "required": True}, "size": {"type": "integer", "minimum": 1}},
        "required": ["guests"]}},
    {"type": "function", "strict": True, "function": {"name": "a", "parameters": {"type": "object", "properties": {}}}},
    {"name": "a", "parameters": {"type": "object", "properties": {"x": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}}},
    {"name": "a", "parameters": {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}]}}}},
    {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "object",
                                                                        "additionalProperties": True}}}},
    {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "string", "maxLength": "long"}}}},
    {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}, "required": "x"}},
    {"name": "a", "parameters": {"type": "object", "properties": {}, "additionalProperties": True}},
    {"name": "a", "parameters": {"type": "object"}},
    {"name": "a", "parameters": {"type": "dict", "properties": {}}},
    {"name": "a", "parameters": {"properties": {}}},
    {"name": "a", "required": ["x"], "parameters": {"type": "object", "properties": {}}},
    {"name": "", "parameters": {"type": "object", "properties": {}}},
    {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "string", "title": "X"}}}},
    {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x", 1]}},
    {"type": "function", "function": {"name": "a", "title": "A", "parameters": {"type": "object", "properties": {}}}},
]


@pytest.mark.parametrize("tool", PLAIN_TOOLS)
def test_plain_tool_read_in_one_walk_as_the_general_reader_reads_it(tool):
    from refiner.specs import dialects

    plain = dialects._plain_spec(tool, dialects.detect_one(tool))
    assert plain is not None
    assert _whole(plain) == _whole(dialects._read_spec(tool, dialects.detect_one(tool), 0))
    assert _whole(dialects.spec_from_dict(tool, plain.dialect)) == _whole(plain)


@pytest.mark.parametrize("tool", PLAIN_TOOLS)
def test_a_plain_tool_pickles_whole(tool):
    """The plain reader leaves fields at their defaults unset (the class's): a pickled copy has every field too."""
    from refiner.specs import dialects

    spec = dialects._plain_spec(tool, dialects.detect_one(tool))
    copy = pickle.loads(pickle.dumps(spec))
    assert _whole(copy) == _whole(spec)
    assert [_fields(p) for p in copy.params.values()] == [_fields(p) for p in spec.params.values()]


@pytest.mark.parametrize("tool", NOT_PLAIN_TOOLS)
def test_other_tools_left_to_the_general_reader(tool):
    from refiner.specs import dialects

    assert dialects._plain_spec(tool, "openai") is None


@pytest.mark.parametrize("tool", PLAIN_TOOLS + NOT_PLAIN_TOOLS + [
    {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "string", "enum": [{"type": "int"}]}}}},
    {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "object", "default": {"type": "str"}}}}},
    {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "int"}}}}])
def test_a_tool_read_without_detection_reads_as_in_its_detected_dialect(tool):
    """A plain tool's shape tells its dialect: the spec (and dialect) detection would give."""
    from refiner.specs import dialects

    def read(fn):
        try:
            return _whole(fn())
        except SpecError as e:
            return str(e)

    assert read(lambda: dialects.spec_from_dict(tool, None, 0)) == read(
        lambda: dialects.spec_from_dict(tool, dialects.detect_one(tool), 0))


class _Name(str):
    pass


def test_a_catalog_files_each_tool_under_its_tool_name():
    """The catalog reads an OpenAI tool's name in place; any other shape, or a name that is no plain non-empty str,
    as :func:`tool_name` does (a later tool of one name replaces the earlier)."""
    from types import MappingProxyType

    from refiner.specs.catalog import ToolCatalog, tool_name

    items = [
        {"type": "function", "function": {"name": "a", "parameters": {}}},
        {"type": "function", "name": "b", "function": {"name": "not_b"}},
        {"type": "function", "function": {"name": _Name("c")}},
        {"type": "function", "function": MappingProxyType({"name": "d"})},
        {"api_name": "e", "parameters": {}},
        ToolSpec("f"),
        {"type": "function", "function": {"name": "a", "description": "the later a"}},
    ]
    catalog = ToolCatalog(items)
    assert list(catalog) == list(dict.fromkeys(tool_name(item) for item in items))
    assert catalog.read == 0 and catalog["a"].description == "the later a"
    with pytest.raises(SpecError):  # (no name to file it under: read at once, and refused)
        ToolCatalog([{"type": "function", "function": {"name": ""}}])
