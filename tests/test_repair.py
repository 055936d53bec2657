"""Tier-1 repair on hand-made cases: each repair kind does its job, and never invents or moves what is right."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall, dependency_order
from refiner.pipeline import Refiner, RequestError
from refiner.repair import (
    coerce_value,
    decode_value,
    enum_spelling,
    is_misspelling,
    reads_back,
    repair_calls,
    repair_text,
    snap,
    spec_is_closed,
)
from refiner.specs import ToolSpec, load_tools

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
    return [a.code for a in actions]


@pytest.mark.parametrize("name", formats.names())
def test_the_gate_on_tier_1s_calls_is_the_gate_on_its_text(tools, name):
    """Tier 1 gates the calls it rendered as they are where they read back as themselves (:func:`reads_back`), and
    its text read back otherwise: either way, the findings of the gate on its text."""
    from refiner.gate import check_text

    upstream = ('<tool_call>\n{"name": "search_flight", "arguments": {"origin": "PAR", "destinaton": "NYC", '
                '"passengers": "2", "cabin": "coach", "max_price": 9.5}}\n</tool_call>')
    t1 = repair_text(upstream, "hermes", tools, out_fmt=name)
    if t1.text == upstream:
        return  # (the calls cannot be written in this format)
    again = check_text(t1.text, name, tools)
    assert [d.to_dict() for d in t1.after.diagnostics] == [d.to_dict() for d in again.diagnostics]
    assert t1.after.calls == again.calls
    if name in ("hermes", "openai", "qwen3_coder", "toolace"):
        assert reads_back(t1.calls, formats.get(name)) == (name in ("hermes", "openai"))


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
        ("cabin", " BUSINESS ", "business"),
        ("airlines", '["BA", "AF"]', ["BA", "AF"]),
    ],
)
def test_schema_guided_coercion(tools, param, value, expected):
    spec = {t.name: t for t in tools}["search_flights"]
    got = coerce_value(spec.params[param], value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    "param, value",
    [
        ("passengers", "two"),
        ("passengers", 2.5),
        ("direct_only", "yes"),
        ("cabin", "premium"),
        ("cabin", "busines"),  # similar is not the same: enum values are never fuzzy-snapped
        ("max_price", "nan"),
        ("flight_no", True),  # which text a boolean stands for is not in the spec
        ("flight_no", False),
    ],
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


@pytest.mark.parametrize(
    "value, members",
    [
        ("5 minutes", ["1 hour", "30 minutes", "1 hour 30 minutes", "45 minutes", "2 hours"]),  # BFCL live_multiple_947
        ("openai", ["all", "postgres", "openapi", "graphql"]),  # one letter apart, another product
        ("-1", ["1", "2"]),  # punctuation that is a sign
        ("1.5", ["15", "2"]),  # or a decimal point
        ("in progress", ["in_progress", "In-Progress"]),  # two members spell it: ambiguous
        ("", ["a"]),
    ],
)
def test_enum_spelling_never_changes_meaning(value, members):
    assert enum_spelling(value, members) is value


def test_enum_spelling_fixes_case_spacing_punctuation():
    assert enum_spelling("3D", ["regular", "3d", "imax"]) == "3d"
    assert enum_spelling("in progress", ["IN_PROGRESS", "DONE"]) == "IN_PROGRESS"
    assert enum_spelling("1 Hour 30 Minutes", ["1 hour", "1 hour 30 minutes"]) == "1 hour 30 minutes"


def test_boolean_for_a_string_enum_is_left_as_written():
    """BFCL's spec declares in_unit_laundry a string enum ["True", "False", "dontcare"] while its gold passes the
    boolean False: turning it into "False" made a correct answer wrong."""
    spec = load_tools([{"name": "find_home", "parameters": {"type": "object", "properties": {
        "in_unit_laundry": {"type": "string", "enum": ["True", "False", "dontcare"], "default": "dontcare"}}}}])[0]
    for trust in (False, True):
        out, actions = repair_calls([ToolCall("find_home", {"in_unit_laundry": False})], [spec], trust_spec=trust)
        assert out[0].arguments["in_unit_laundry"] is False and actions == []
    # not even when the caller's data writes every value as text (value style "text"): which text, the spec does
    # not say
    out, actions = repair_calls([ToolCall("find_home", {"in_unit_laundry": False})], [spec], text_values=True)
    assert out[0].arguments["in_unit_laundry"] is False and actions == []


def test_a_value_of_its_declared_type_is_never_rewritten_in_any_format():
    """A correct call written the way ToolRL-trained models write API-Bank calls (typed values): untouched in every
    format. The value style is the caller's to state, never implied by the wire format."""
    spec = load_tools([{"name": "calc_area_triangle", "parameters": {"type": "object", "properties": {
        "base": {"type": "integer"}, "height": {"type": "integer"}, "exact": {"type": "boolean"}},
        "required": ["base", "height"]}}])
    call = ToolCall("calc_area_triangle", {"base": 5, "height": 3, "exact": True})
    refiner = Refiner()
    for name in formats.names():
        fmt = formats.get(name)
        if fmt.names_only:
            continue
        text = fmt.render([call])
        for trust in (False, True):
            out, actions = repair_calls([call], spec, fmt=name, trust_spec=trust)
            assert out == [call] and actions == [], (name, trust, actions)
        res = refiner.refine({"tools": spec, "upstream": text, "format": name})
        assert res["stage"] == "unchanged" and res["refined"] == text and not res["changed"], (name, res["reason"])
    # the exact text from the field report, in the apibank format
    text = '<tool_call>\n{"name": "calc_area_triangle", "parameters": {"base": 5, "height": 3}}\n</tool_call>'
    res = refiner.refine({"tools": spec, "upstream": text})
    assert res["format"] == "apibank" and res["calls"][0]["arguments"] == {"base": 5, "height": 3}
    assert res["stage"] == "unchanged" and not res["changed"]


def test_value_style_text_writes_numbers_as_text_and_keeps_booleans():
    spec = load_tools([{"name": "f", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}, "on": {"type": "boolean"}}}}])
    res = Refiner().refine({"tools": spec, "upstream": formats.get("apibank").render([ToolCall("f", {"n": 5, "on": True})]),
                            "format": "apibank", "value_style": "text"})
    assert res["calls"][0]["arguments"] == {"n": "5", "on": True}
    with pytest.raises(RequestError, match="value_style"):
        Refiner().refine({"upstream": "x", "value_style": "strings"})


def test_is_misspelling():
    assert is_misspelling("sotr_by", "sort_by")  # swapped letters
    assert is_misspelling("destinaton", "destination")  # a dropped letter
    assert is_misspelling("originn", "origin")
    assert not is_misspelling("sortBy", "sort_by")  # another spelling convention, not a slip
    assert not is_misspelling("min_price", "max_price")  # two slips: another parameter
    assert not is_misspelling("address_line1", "address_line2")  # digits differ
    assert not is_misspelling("lat", "lan")  # too short to tell a slip from another word


def test_decode_value_only_undoes_text_encoding(tools):
    p = {t.name: t for t in tools}["search_flights"].params
    assert decode_value(p["direct_only"], "True") is True
    assert decode_value(p["airlines"], '["BA"]') == ["BA"]
    for name, value in [("passengers", "2"), ("flight_no", 12), ("cabin", "Business"), ("origin", ["NYC"])]:
        assert decode_value(p[name], value) is value


def test_call_with_only_soft_findings_keeps_what_the_spec_may_have_missed(tools):
    """All required parameters present: an unknown parameter, a number written as text, a one-item list, an enum in
    another case and a name in another spelling convention may all be what the tool really takes (NESTFUL's and
    BFCL's gold do each of these); tier 1 leaves them to the model. A misspelling and JSON/boolean text are fixed."""
    args = {"origin": ["NYC"], "destination": "LON", "passengers": "2", "cabin": "Business", "flightNo": "BA1",
            "colour": "red"}
    call = ToolCall("search_flights", args)
    out, actions = repair_calls([call], tools)
    assert out == [call] and actions == []
    slips = {"dirct_only": "true", "airlines": '["BA"]'}
    out, actions = repair_calls([ToolCall("search_flights", {**args, **slips})], tools)
    assert out[0].arguments == {**args, "direct_only": True, "airlines": ["BA"]}
    assert kinds(actions) == ["snap_param", "coerce", "coerce"]
    # the same call with the spec trusted: everything is repaired
    out, actions = repair_calls([call], tools, trust_spec=True)
    assert out[0].arguments == {"origin": "NYC", "destination": "LON", "passengers": 2, "cabin": "business",
                                "flight_no": "BA1"}
    assert set(kinds(actions)) == {"snap_param", "drop_param", "coerce"}


def test_failing_call_is_repaired_in_full(tools):
    """A required parameter is missing: the call cannot run as written, so the spec is believed. The snap fills the
    missing name; the unknown parameter left over is the residue and is dropped; values are coerced."""
    call = ToolCall("search_flights", {"originn": "NYC", "destination": "LON", "passengers": "2", "colour": "red"})
    out, actions = repair_calls([call], tools)
    assert out == [ToolCall("search_flights", {"origin": "NYC", "destination": "LON", "passengers": 2})]
    assert kinds(actions) == ["snap_param", "drop_param", "coerce"]
    # while a required parameter is still missing, unknown ones are kept: one may be its value under another name
    out, actions = repair_calls([ToolCall("search_flights", {"from": "NYC", "destination": "LON", "passengers": "2"})],
                                tools)
    assert out[0].arguments == {"from": "NYC", "destination": "LON", "passengers": 2} and kinds(actions) == ["coerce"]


def test_closed_spec_is_believed():
    schema = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}, "required": ["q"]}
    strict = load_tools([{"type": "function", "function": {"name": "s", "strict": True, "parameters": schema}}])[0]
    loose = load_tools([{"type": "function", "function": {"name": "s", "parameters": schema}}])[0]
    closed = ToolSpec("s", params=loose.params, required=loose.required, extra={"additionalProperties": False})
    assert spec_is_closed(strict) and spec_is_closed(closed) and not spec_is_closed(loose)
    # a JSON Schema that closes its parameters is read as closed, and says so again when rendered back
    loaded = load_tools([{"name": "s", "parameters": {**schema, "additionalProperties": False}}])[0]
    assert spec_is_closed(loaded) and loaded.to_json_schema()["parameters"]["additionalProperties"] is False
    assert spec_is_closed(load_tools([loaded.to_json_schema()])[0])
    call = ToolCall("s", {"q": "x", "n": "3", "extra": 1})
    assert repair_calls([call], [loose])[0] == [call]
    for spec in (strict, closed, loaded):
        assert repair_calls([call], [spec])[0] == [ToolCall("s", {"q": "x", "n": 3})]
