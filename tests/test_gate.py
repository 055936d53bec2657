"""The schema gate: each check fires on the input it is about and stays quiet on correct calls."""

from __future__ import annotations

import json

import pytest

from refiner.calls import ToolCall, dependencies, references_in
from refiner.gate import MAX_CHECKED_VALUES, Finding, check_calls, check_text, passes
from refiner.specs import load_tools

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather forecast for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 2, "maxLength": 40},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                "hourly": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "where": {
                    "type": "object",
                    "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                    "required": ["lat", "lon"],
                },
            },
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def tools():
    return load_tools([WEATHER])


def codes(diags: list[Finding]) -> list[str]:
    return [d.code for d in diags]


def call(**args) -> ToolCall:
    return ToolCall("get_weather", args)


def test_correct_call_passes(tools):
    diags = check_calls(
        [call(city="Paris", days=3, unit="celsius", zip="75001", hourly=True, tags=["a"], where={"lat": 1, "lon": 2.5})],
        tools,
    )
    assert diags == []
    assert passes(diags)


@pytest.mark.parametrize(
    "args, code, param",
    [
        ({}, "missing_required", "city"),
        ({"city": "Paris", "country": "FR"}, "unknown_param", "country"),
        ({"city": "Paris", "days": "3"}, "type", "days"),
        ({"city": "Paris", "days": True}, "type", "days"),  # a boolean is not an integer
        ({"city": "Paris", "days": 2.5}, "type", "days"),
        ({"city": "Paris", "unit": "kelvin"}, "enum", "unit"),
        ({"city": "Paris", "days": 0}, "range", "days"),
        ({"city": "Paris", "days": 15}, "range", "days"),
        ({"city": "Paris", "zip": "ABCDE"}, "pattern", "zip"),
        ({"city": "P"}, "length", "city"),
        ({"city": "Paris", "tags": ["a", 3]}, "type", "tags"),
        ({"city": "Paris", "where": {"lat": 1}}, "missing_required", "where"),
        ({"city": "Paris", "where": {"lat": "1", "lon": 2}}, "type", "where"),
    ],
)
def test_each_check_fires(tools, args, code, param):
    diags = check_calls([call(**args)], tools)
    assert code in codes(diags), diags
    d = next(d for d in diags if d.code == code)
    assert (d.call, d.tool, d.param, d.severity) == (0, "get_weather", param, "error")
    assert not passes(diags)


def test_unknown_tool_and_number_accepts_integers(tools):
    diags = check_calls([ToolCall("get_wether", {"city": "Paris"})], tools)
    assert codes(diags) == ["unknown_tool"] and diags[0].tool == "get_wether"
    assert check_calls([call(city="Paris", where={"lat": 1, "lon": 2})], tools) == []


def test_diagnostics_are_json_serialisable(tools):
    diags = check_calls([call(days="x", extra=1)], tools)
    assert json.loads(json.dumps([d.to_dict() for d in diags]))[0].keys() >= {"code", "call", "tool", "param", "message"}


def test_references_nestools_and_nestful():
    assert references_in({"a": "API_call_0", "b": ["x API_call_12 y"], "c": "$var1.skyId$", "d": "$var_2$"}) == [
        "API_call_0",
        "API_call_12",
        "var1",
        "var_2",
    ]
    calls = [
        ToolCall("a", {}, outputs=("API_call_0",)),
        ToolCall("b", {"x": "API_call_0"}, outputs=("API_call_1",)),
        ToolCall("c", {"x": "API_call_1", "y": "API_call_0"}, outputs=("API_call_2",)),
    ]
    assert check_calls(calls, None) == []
    assert dependencies(calls) == [set(), {0}, {0, 1}]


def test_forward_undefined_and_duplicate_references():
    calls = [
        ToolCall("b", {"x": "API_call_1"}, outputs=("API_call_0",)),
        ToolCall("a", {"y": "API_call_7"}, outputs=("API_call_1",)),
        ToolCall("c", {}, outputs=("API_call_1",)),
    ]
    diags = check_calls(calls, None)
    assert codes(diags) == ["duplicate_output", "forward_reference", "undefined_reference"]
    assert diags[1].call == 0 and diags[1].param == "x"
    # NESTFUL labels written with or without the leading $
    nestful = [ToolCall("f", {"q": "$var2.id$"}, outputs=("$var1",)), ToolCall("g", {}, outputs=("var2",))]
    assert codes(check_calls(nestful, None)) == ["forward_reference"]


def test_reference_values_skip_type_checks():
    tools = load_tools([{"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}])
    calls = [ToolCall("f", {"n": 1}, outputs=("API_call_0",)), ToolCall("f", {"n": "API_call_0"}, outputs=("API_call_1",))]
    assert check_calls(calls, tools) == []


def test_check_text_reports_format_and_recovers_calls(tools):
    ok = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    rep = check_text(ok, "hermes", tools)
    assert rep.strict_ok and rep.passed and rep.calls == [call(city="Paris")]
    broken = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}'
    rep = check_text(broken, "hermes", tools)
    assert not rep.strict_ok and not rep.passed
    assert codes(rep.diagnostics) == ["format"]
    assert rep.calls == [call(city="Paris")]  # the lenient parse still reads the call
    rep = check_text("I cannot help with that.", "hermes", tools)
    assert codes(rep.diagnostics) == ["format", "no_calls"]



def test_check_text_parses_strictly_once_and_says_why_it_failed(tools, monkeypatch):
    from refiner import formats

    hermes = type(formats.get("hermes"))
    strict_calls = []
    original = hermes.parse_strict

    def counting(self, text):
        strict_calls.append(text)
        return original(self, text)

    monkeypatch.setattr(hermes, "parse_strict", counting)
    broken = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}'
    rep = check_text(broken, "hermes", tools)
    assert len(strict_calls) == 1
    with pytest.raises(formats.FormatError) as err:
        original(formats.get("hermes"), broken)
    assert rep.diagnostics[0].message == f"not valid hermes: {err.value.message}"


def test_without_tools_only_structure_is_checked():
    assert check_calls([ToolCall("anything", {"x": 1})], None) == []


def test_the_finding_record_takes_every_field_as_the_generated_constructor_would():
    """Finding writes its constructor by hand (the generated frozen one is slower): it must take the dataclass's
    fields in order, with their defaults, and set each one."""
    import dataclasses
    import inspect

    klass = Finding
    fields = dataclasses.fields(klass)
    params = list(inspect.signature(klass.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.default for p in params] == [inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
                                           for f in fields]
    values = [f"v{i}" for i in range(len(fields))]
    record = klass(*values)
    assert vars(record) == dict(zip([f.name for f in fields], values))
    assert list(record.to_dict().items()) == list(zip([f.name for f in fields], values))
    assert record.to_dict() is not vars(record)
    assert record == klass(*values) and hash(record) == hash(klass(*values))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, fields[0].name, "x")


def test_a_value_equal_to_its_declared_default_is_excused_before_its_items_are_counted() -> None:
    """A long default passed as written costs one checked value, so the arguments after it are still checked."""
    default = list(range(MAX_CHECKED_VALUES))
    tools = load_tools([{"name": "plot", "parameters": {"type": "object", "properties": {
        "xs": {"type": "array", "items": {"type": "integer"}, "default": default},
        "bins": {"type": "integer"}}}}])
    diags = check_calls([ToolCall("plot", {"xs": default, "bins": "ten"})], tools)
    assert [d.code for d in diags if d.param == "bins"] == ["type"]
