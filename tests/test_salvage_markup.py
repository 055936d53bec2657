"""Markup nobody registered: with tools offered, the offered tool names and their parameter names
find calls in markup no grammar knows (refiner/formats/markup.py, through salvage); never from prose, never a
guessed value, always reported as found that way. The texts are written the way models answer when no format is
imposed: an XML-ish element per call, ReAct's Action / Action Input, ``name: key=value`` lines, YAML-ish blocks."""

from __future__ import annotations

import pytest
from hostile import hostile_texts

from refiner.calls import ToolCall
from refiner.formats import markup
from refiner.formats.salvage import salvage
from refiner.pipeline import Refiner

OFFERED = {"get_weather": ["city", "unit"], "get_time": ["city"], "search_web": ["query", "max_results"],
           "roll_dice": []}
TOOLS = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}},
    {"name": "get_time", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                        "required": ["city"]}},
    {"name": "search_web", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "max_results": {"type": "integer"}}, "required": ["query"]}},
    {"name": "roll_dice", "parameters": {"type": "object", "properties": {}}},
]
P = ToolCall("get_weather", {"city": "Paris"})
PU = ToolCall("get_weather", {"city": "Paris", "unit": "celsius"})
R = ToolCall("get_time", {"city": "Rome"})

MARKUP = {
    "element per call": ("<call><tool>get_weather</tool><city>Paris</city></call>", [P]),
    "two elements": (("<call>\n  <tool>get_weather</tool>\n  <city>Paris</city>\n  <unit>celsius</unit>\n</call>\n"
                      "<call>\n  <tool>get_time</tool>\n  <city>Rome</city>\n</call>"), [PU, R]),
    "name attribute and param elements": (('<function_call name="get_weather"><param name="city">Paris</param>'
                                           "</function_call>"), [P]),
    "tool as the tag, attributes": ('<get_weather city="Paris" unit="celsius"/>', [PU]),
    "tool as the tag, entities": ("<get_weather><city>Paris &amp; Co</city></get_weather>",
                                  [ToolCall("get_weather", {"city": "Paris & Co"})]),
    "name: key=value": ("get_weather: city=Paris, unit=celsius", [PU]),
    "quoted value with a comma": ('search_web: query="cafes, open late"; max_results=3',
                                  [ToolCall("search_web", {"query": "cafes, open late", "max_results": 3})]),
    "labelled lines": ('Thought: I need the weather.\nTool: get_weather\nTool Input: {"city": "Paris"}\n', [P]),
    "labelled lines, JSON on its own line": ('Tool: search_web\nTool Input:\n{"query": "best cafes", "max_results": 5}',
                                    [ToolCall("search_web", {"query": "best cafes", "max_results": 5})]),
    "tool and arguments block": ("tool: get_weather\narguments:\n  city: Paris\n  unit: celsius\n", [PU]),
    "YAML list": ("- get_weather:\n    city: Paris\n- get_time:\n    city: Rome\n", [P, R]),
    "YAML in a fence": ("Here you go:\n```yaml\nget_weather:\n  city: Paris\n```", [P]),
}


@pytest.mark.parametrize("text, want", list(MARKUP.values()), ids=list(MARKUP))
def test_calls_in_unregistered_markup_are_found_by_the_offered_names(text, want):
    got = salvage(text, OFFERED)
    assert got.calls == want
    assert got.sites and all(s.by_names and markup.KIND in s.kind for s in got.sites)
    assert any("offered tool and parameter names" in n for n in got.notes)


PROSE = {
    "mention": "You could use get_weather to check the forecast.",
    "name then prose": "get_weather: returns the forecast for a city.",
    "inside a sentence": "Use get_weather: city=Paris would work.",
    "words around": "I called get_weather and the city: Paris was sunny.",
    "element in a sentence": "The <tool>get_weather</tool> tool needs a city.",
    "no value": "get_weather: city=",
    "name alone": "tool: get_weather",
    "undeclared keys only": "get_weather: town=Paris",
    "longer name": "my_get_weather: city=Paris\nget_weather2: city=Paris",
    "dotted": "api.get_weather.v2: city=Paris",
}


@pytest.mark.parametrize("text", list(PROSE.values()), ids=list(PROSE))
def test_prose_and_half_written_markup_give_no_call(text):
    assert salvage(text, OFFERED).calls == []


def test_without_tools_nothing_is_read_this_way():
    for text, _ in MARKUP.values():
        assert not any(s.by_names for s in salvage(text, None).sites)


def test_only_declared_parameters_are_read_and_nothing_is_filled_in():
    got = salvage("get_weather: city=Paris, town=Lyon, unit=", OFFERED)
    assert got.calls == [P]
    assert any("without a value" in n for n in got.notes) and any("'town'" in n for n in got.notes)
    got = salvage('Tool: get_weather\nTool Input: {"city": "Paris", "country": "FR"}', OFFERED)
    assert got.calls == [P] and any("does not declare" in n for n in got.notes)


def test_a_registered_format_or_another_site_comes_first():
    text = '<tool_call>{"name": "get_time", "arguments": {"city": "Rome"}}</tool_call>\nget_weather: city=Paris'
    got = salvage(text, OFFERED)
    assert got.calls == [R] and not any(s.by_names for s in got.sites)


@pytest.mark.parametrize("text, want", [
    ('<search_web query="42" max_results="5"/>', {"query": "42", "max_results": 5}),
    ("<search_web><query>1984</query><max_results>2</max_results></search_web>", {"query": "1984", "max_results": 2}),
    ("search_web: query=2001, max_results=3", {"query": "2001", "max_results": 3}),
    ("- get_weather:\n    city: 94105\n", {"city": "94105"}),
])
def test_values_take_their_declared_types_when_the_specs_are_known(text, want):
    """Markup writes no types: a number-like text for a string parameter stays the text it is."""
    res = Refiner().refine({"upstream": text, "tools": TOOLS})
    assert [c["arguments"] for c in res["calls"]] == [want]


def test_the_pipeline_reads_them_and_says_how_they_were_found():
    res = Refiner().refine({"upstream": MARKUP["two elements"][0], "tools": TOOLS})
    assert res["calls"] == [PU.to_dict(), R.to_dict()]
    found = [d for d in res["upstream_diagnostics"] if d["code"] == "offered_names"]
    assert found and found[0]["severity"] == "warning" and "offered tool and parameter names" in found[0]["message"]
    assert [a["code"] for a in res["actions"]][:1] == ["salvage"]
    res = Refiner().refine({"upstream": PROSE["mention"], "tools": TOOLS})
    assert res["calls"] == [] and not any(d["code"] == "offered_names" for d in res["upstream_diagnostics"])


N = 200_000


def _fill(piece: str) -> str:
    return (piece * (N // len(piece) + 1))[:N]


HOSTILE = [
    _fill("<get_weather>"), _fill("get_weather "), _fill("<x>get_weather</x>" + "<city>" * 300),
    _fill("Action: get_weather\n"), _fill("- get_weather:\n    city: Paris\n"), _fill('<c name="get_weather" '),
    "<call><tool>get_weather</tool>" + _fill("<city>"), "<call><tool>get_weather</tool>" + _fill('<param name="city">'),
    "x" * 150_000 + " get_weather: city=Paris" + "y" * 40_000, _fill("get_weather: city="),
    _fill('Action: get_weather\nAction Input: {"city": ['), "get_weather:\n" + _fill("  city: Paris\n"),
]


@pytest.mark.parametrize("text", HOSTILE + [t for _, t in hostile_texts(20_000)])
def test_hostile_texts_are_read_within_counted_bounds(text):
    found, _, hits = markup.calls_by_names(text, 0, OFFERED)
    assert hits <= markup.MAX_NAME_HITS
    assert len(found) <= hits
    assert all(isinstance(f.call, ToolCall) and set(f.call.arguments) <= set(OFFERED[f.call.name]) for f in found)
    got = salvage(text, OFFERED)
    assert len(got.calls) <= 128 and got.work["names"] <= markup.MAX_NAME_HITS
