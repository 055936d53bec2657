"""Tier-1 repair on hand-made cases: each repair kind does its job, and never invents or moves what is right."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.repair import coerce_value, dependency_order, repair_calls, repair_text, snap
from refiner.specs import load_tools

TOOLS = [
    {
        "name": "search_flights",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string"},
                "destination": {"type": "string"},
                "passengers": {"type": "integer"},
                "max_price": {"type": "number"},
                "direct_only": {"type": "boolean"},
                "cabin": {"type": "string", "enum": ["economy", "business", "first"]},
                "airlines": {"type": "array", "items": {"type": "string"}},
                "flight_no": {"type": "string"},
            },
            "required": ["origin", "destination"],
        },
    },
    {"name": "search_hotels", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    {"name": "book_hotel", "parameters": {"type": "object", "properties": {"hotel_id": {"type": "string"}}}},
]


@pytest.fixture(scope="module")
def tools():
    return load_tools(TOOLS)


def kinds(actions) -> list[str]:
    return [a.kind for a in actions]


def test_snap_uses_cutoff_and_margin():
    names = ["search_flights", "search_hotels", "book_hotel"]
    assert snap("search_flight", names, 80) == "search_flights"
    assert snap("SearchFlights", names, 80) == "search_flights"  # normalised equality
    assert snap("weather", names, 80) is None
    assert snap("search_", names, 50) is None  # equally close to two tools: ambiguous


def test_names_and_params_snapped_unknown_dropped(tools):
    calls = [ToolCall("serch_flights", {"orign": "NYC", "destination": "LON", "colour": "red"})]
    out, actions = repair_calls(calls, {t.name: t for t in tools})
    assert out == [ToolCall("search_flights", {"origin": "NYC", "destination": "LON"})]
    assert kinds(actions) == ["snap_tool", "snap_param", "drop_param"]
    assert actions[1].param == "origin" and actions[2].param == "colour"


def test_missing_required_value_is_not_invented(tools):
    out, actions = repair_calls([ToolCall("search_flights", {"origin": "NYC"})], tools)
    assert out == [ToolCall("search_flights", {"origin": "NYC"})] and actions == []


@pytest.mark.parametrize(
    "param, value, expected",
    [
        ("passengers", "2", 2),
        ("passengers", 2.0, 2),
        ("max_price", "199.5", 199.5),
        ("max_price", "200", 200),
        ("direct_only", "True", True),
        ("direct_only", "false", False),
        ("flight_no", 123, "123"),
        ("cabin", "Business", "business"),
        ("cabin", "busines", "business"),
        ("airlines", '["BA", "AF"]', ["BA", "AF"]),
    ],
)
def test_schema_guided_coercion(tools, param, value, expected):
    spec = {t.name: t for t in tools}["search_flights"]
    got = coerce_value(spec.params[param], value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    "param, value",
    [("passengers", "two"), ("passengers", 2.5), ("direct_only", "yes"), ("cabin", "premium"), ("max_price", "nan")],
)
def test_no_coercion_when_ambiguous(tools, param, value):
    spec = {t.name: t for t in tools}["search_flights"]
    assert coerce_value(spec.params[param], value) is value


def test_dependency_order_is_topological_and_stable():
    a = ToolCall("a", {}, outputs=("API_call_0",))
    b = ToolCall("b", {"x": "API_call_0"}, outputs=("API_call_1",))
    c = ToolCall("c", {}, outputs=("API_call_2",))
    d = ToolCall("d", {"y": "API_call_1"}, outputs=("API_call_3",))
    assert dependency_order([d, c, b, a]) == [1, 3, 2, 0]  # c stays first: independent calls keep their order
    out, actions = repair_calls([b, a, c], None)
    assert out == [a, b, c] and kinds(actions) == ["reorder"]
    assert dependency_order([a, c]) == [0, 1]
    cyc = [ToolCall("p", {"x": "API_call_1"}, outputs=("API_call_0",)), ToolCall("q", {"x": "API_call_0"}, outputs=("API_call_1",))]
    assert dependency_order(cyc) is None
    assert repair_calls(cyc, None)[0] == cyc  # a cycle is left alone


def test_repair_text_broken_json_and_tags(tools):
    text = '<tool_call>{"name": "search_hotels", "arguments": {"city": "Rome"}'
    r = repair_text(text, "hermes", tools)
    assert r.changed and r.after.passed and not r.before.passed
    assert formats.get("hermes").parse_strict(r.text) == [ToolCall("search_hotels", {"city": "Rome"})]
    assert kinds(r.actions) == ["parse_repair"]


def test_repair_text_leaves_correct_text_verbatim(tools):
    text = 'Sure.\n<tool_call>{"name": "search_hotels", "arguments": {"city": "Rome"}}</tool_call>'
    r = repair_text(text, "hermes", tools)
    assert not r.changed and r.text == text and r.after.passed


def test_repair_text_unrecoverable_is_returned_as_is(tools):
    r = repair_text("no calls here", "hermes", tools)
    assert not r.changed and r.text == "no calls here" and not r.after.passed
