"""NESTFUL (a bare JSON list of calls) read leniently: a list that lost or doubled one character is read whole with
it mended (refiner.formats.nestful.mend_json_list), never a value made up, never a text that stops completed."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats.nestful import mend_json_list
from refiner.pipeline import Refiner
from refiner.specs import load_tools

NESTFUL = formats.get("nestful")
TOOLS = [{"name": "calculate_bmi", "parameters": {"type": "object", "properties": {
    "weight_kg": {"type": "number"}, "height_m": {"type": "number"}}}}]
BMI = [ToolCall("calculate_bmi", {"weight_kg": 70, "height_m": 1.75})]


@pytest.mark.parametrize(
    "text",
    [
        '[{"name": "calculate_bmi", "arguments": {"weight_kg" 70, "height_m": 1.75}}]',  # a ':' (read as 0 before)
        '[{"name": "calculate_bmi", "arguments": {"weight_kg: 70, "height_m": 1.75}}]',  # a key's closing quote
        '[{"name": "calculate_bmi", "arguments: {"weight_kg": 70, "height_m": 1.75}}]',  # "arguments"'s quote
        '["name": "calculate_bmi", "arguments": {"weight_kg": 70, "height_m": 1.75}}]',  # the call's '{'
        '[{"name": "calculate_bmi", "arguments": {"weight_kg": 70, "height_m": 1.75}}}]',  # a doubled '}'
    ],
)
def test_one_lost_or_doubled_character_is_mended(text):
    got = NESTFUL.parse_lenient(text)
    assert got.calls == BMI, got.problems
    assert [p.code for p in got.problems] == ["mended"]
    # through the pipeline: the mended reading is the one refined (salvage, which finds no call object in the
    # broken text, does not replace it)
    res = Refiner().refine({"tools": TOOLS, "upstream": text, "format": "nestful"})
    assert NESTFUL.parse_strict(res["refined"]) == BMI


def test_labels_are_kept():
    text = '[{"name": "f", "arguments": {"a" 1}, "label": "$var_1"}, {"name": "g", "arguments": {"b": "$var_1.x$"}}]'
    got = NESTFUL.parse_lenient(text)
    assert got.calls == [ToolCall("f", {"a": 1}, ("$var_1",)), ToolCall("g", {"b": "$var_1.x$"})]


def test_a_text_that_stops_inside_a_string_is_not_mended():
    """``"tolls]}}]``: a quote lost before the closers, or a text cut inside the string; the text does not say, so
    it is not closed into a whole call."""
    text = '[{"name": "directions", "arguments": {"start": "New York", "avoid": ["highways", "tolls]}}]'
    assert mend_json_list(text) is None
    got = NESTFUL.parse_lenient(text)
    assert not any(p.code == "mended" for p in got.problems)


def test_the_tools_settle_a_mended_reading_and_without_them_none_is_taken():
    """``[3, 4]]``: a doubled ']' or a lost '[' (a list of lists); the parameter's declared type settles it."""
    text = '[{"name": "ttest", "arguments": {"group1": [3, 4]], "group2": [7, 8]}}]'
    assert mend_json_list(text) is None
    specs = {s.name: s.params for s in load_tools([{"name": "ttest", "parameters": {"type": "object", "properties": {
        "group1": {"type": "array", "items": {"type": "integer"}},
        "group2": {"type": "array", "items": {"type": "integer"}}}}}])}
    value, what = mend_json_list(text, specs)
    assert value == [{"name": "ttest", "arguments": {"group1": [3, 4], "group2": [7, 8]}}] and "doubled" in what


def test_a_mended_item_must_be_a_call_and_more_arguments_outweigh_loose_types():
    """``, arguments": {...}`` lost the key's opening quote; a quote before the space would make a key
    ``" arguments"`` (an item with no arguments): not a NESTFUL call. And a value of a type the spec declares
    otherwise (BFCL passes "dontcare" for an integer) does not make a reading with fewer arguments win."""
    text = '[{"name": "lookup", arguments": {"artist": "Imagine Dragons", "year": "dontcare"}}]'
    specs = {s.name: s.params for s in load_tools([{"name": "lookup", "parameters": {"type": "object", "properties": {
        "artist": {"type": "string"}, "year": {"type": "integer"}}}}])}
    got = NESTFUL.parse_lenient(text, tools=specs)
    assert got.calls == [ToolCall("lookup", {"artist": "Imagine Dragons", "year": "dontcare"})], got.problems


ROUTE_TOOLS = [{"name": "route", "parameters": {"type": "object", "properties": {
    "start": {"type": "string"}, "stops": {"type": "array", "items": {"type": "string"}},
    "coords": {"type": "array", "items": {"type": "number"}}, "unit": {"type": "string"}}}}]
ROUTE = {s.name: s.params for s in load_tools(ROUTE_TOOLS)}


def test_list_arguments_that_lost_their_brackets_are_read_for_array_parameters():
    """Every bracket removed (the list's own and its list arguments'): the bare values after a member are its list
    when the tools declare that parameter an array (json repair dropped all but the first value)."""
    text = ('{"name": "route", "arguments": {"start": "SF", "stops": "Santa Barbara", "Monterey", "unit": "km"}}, '
            '{"name": "route", "arguments": {"coords": 33.4, -112.0}}')
    got = NESTFUL.parse_lenient(text, tools=ROUTE)
    assert got.calls == [ToolCall("route", {"start": "SF", "stops": ["Santa Barbara", "Monterey"], "unit": "km"}),
                         ToolCall("route", {"coords": [33.4, -112.0]})], got.problems
    assert [p.code for p in got.problems] == ["mended"]
    res = Refiner().refine({"tools": ROUTE_TOOLS, "upstream": text, "format": "nestful"})
    assert NESTFUL.parse_strict(res["refined"]) == got.calls


@pytest.mark.parametrize(
    "text, tools",
    [
        # the parameter is not an array: the bare value is not its list
        ('{"name": "route", "arguments": {"start": "SF", "Oakland", "unit": "km"}}', ROUTE),
        # the values do not fit the array's items
        ('{"name": "route", "arguments": {"coords": "north", "south"}}', ROUTE),
        # no tools: nothing says the parameter takes a list
        ('{"name": "route", "arguments": {"stops": "Santa Barbara", "Monterey"}}', None),
    ],
)
def test_bare_values_are_a_list_only_where_the_tools_say_so(text, tools):
    got = NESTFUL.parse_lenient(text, tools=tools)
    assert not any(p.code == "mended" for p in got.problems)


def test_a_mend_never_turns_a_backslash_into_an_escaped_quote():
    """``detail\\_level`` (a markdown escape, not JSON) once read as the key ``detail"_level``: a quote inserted after
    the backslash made it an escape. The key is read as written (salvage and tier 1 settle it by the tools)."""
    from refiner import formats

    text = '[{"name": "describe", "arguments": {"topic": "x", "detail' + "\\" + '_level": 2}}]'
    got = formats.get("nestful").parse_lenient(text)
    assert all('"' not in k for c in got.calls for k in c.arguments), got.calls


def test_arguments_under_parameters_are_read_strictly_and_written_back_under_arguments():
    """The list a JSON schema constrains for ``tool_choice="required"`` (SGLang's json_array_detector, vLLM's
    required path): the same list with each call's arguments under ``"parameters"``."""
    text = ('[{"name": "calculate_bmi", "parameters": {"weight_kg": 70, "height_m": 1.75}}, '
            '{"name": "calculate_bmi", "arguments": {"weight_kg": 70, "height_m": 1.75}, "label": "$var_2"}]')
    calls = [BMI[0], ToolCall("calculate_bmi", BMI[0].arguments, ("$var_2",))]
    assert formats.detect_format(text) == "nestful"
    assert NESTFUL.parse_strict(text) == calls
    assert '"parameters"' not in NESTFUL.render(calls)
    assert NESTFUL.parse_strict(NESTFUL.render(calls)) == calls


@pytest.mark.parametrize("item", [
    '{"name": "calculate_bmi", "parameters": {"weight_kg": 70}, "arguments": {"height_m": 1.75}}',  # both keys
    '{"name": "calculate_bmi", "parameters": [70, 1.75]}',  # not an object
])
def test_a_call_with_both_keys_or_parameters_not_an_object_is_not_read_strictly(item):
    with pytest.raises(formats.FormatError):
        NESTFUL.parse_strict(f"[{item}]")
    assert mend_json_list(f"[{item}}}]") is None


def test_a_parameters_list_that_lost_one_character_is_mended():
    text = '[{"name": "calculate_bmi", "parameters": {"weight_kg" 70, "height_m": 1.75}}]'
    got = NESTFUL.parse_lenient(text)
    assert got.calls == BMI
    assert [p.code for p in got.problems] == ["mended"]
