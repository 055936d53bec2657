"""The anchored reader's JSON arguments: a tool name in markup no catalog row knows, then (on its line or after a
short label line) one JSON object whose keys are the tool's declared parameters, is that tool's call with exactly
that object as its arguments. Prose, drafts and objects holding other keys are not calls. Spellings are made up
for this file."""

from __future__ import annotations

import json

import pytest

from refiner.calls import ToolCall
from refiner.formats.anchored import anchored_calls
from refiner.formats.reading import read_upstream
from refiner.pipeline import Refiner
from refiner.specs import tool_catalog


def _tool(name: str, **props: str) -> dict:
    schema = {"type": "object", "properties": {k: {"type": t} for k, t in props.items()}, "required": [*props][:1]}
    return {"type": "function", "function": {"name": name, "parameters": schema}}


TOOLS = [_tool("get_weather", city="string", days="integer"), _tool("lookup", term="string", limit="integer",
                                                                     filters="object"),
         _tool("copy_file", src="string", dst="string")]
OFFERED = {t["function"]["name"]: list(t["function"]["parameters"]["properties"]) for t in TOOLS}


def _anchored(text: str) -> list[ToolCall]:
    return [f.call for f in anchored_calls(text, 0, OFFERED)[0]]


def _upstream(text: str) -> list[ToolCall]:
    catalog = tool_catalog(TOOLS)
    return read_upstream(text, None, [catalog[n] for n in catalog]).calls


PARIS = ToolCall("get_weather", {"city": "Paris", "days": 3})


@pytest.mark.parametrize("read", [_anchored, _upstream], ids=["anchored", "upstream"])
def test_the_arguments_after_a_label_line_are_the_json_object_itself(read):
    assert read('§CALL§: get_weather\n§ARGS§: {"city": "Paris", "days": 3}') == [PARIS]
    assert read('§CALL§: get_weather\n§ARGS§: {"city": "Paris"}') == [ToolCall("get_weather", {"city": "Paris"})]
    assert read('@@get_weather@@ {"city": "Paris", "days": 3}') == [PARIS]


def test_the_refiner_reads_the_label_line_call():
    text = '§CALL§: get_weather\n§ARGS§: {"city": "Paris", "days": 3}'
    out = Refiner().refine({"upstream": text, "tools": TOOLS})
    assert out["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]
    assert "anchored on the offered names" in str(out["upstream_diagnostics"])


FILTERS = {"lang": ["en", "fr"], "since": {"year": 2020}}
FAMILIES = {
    "section signs": ("§CALL§: {name}\n§ARGS§: {args}", "\n"),
    "double colons": ("::tool:: {name}\n::input:: {args}", "\n\n"),
    "hash rules": ("## {name} ##\n=> {args}", "\n"),
    "arrows, label on its own line": ("-> {name}\n<args>\n{args}", "\n---\n"),
    "brackets, same line": ("[[{name}]] {args}", "\n"),
    "percent fence": ("%%% {name}\n%args%\n{args}\n%%%", "\n"),
}
CALLS = {
    "one argument": [ToolCall("get_weather", {"city": "Lima"})],
    "two arguments": [ToolCall("copy_file", {"src": "a.txt", "dst": "b/a.txt"})],
    "three arguments, nested": [ToolCall("lookup", {"term": "tide \"tables\"", "limit": 5, "filters": FILTERS})],
    "parallel": [PARIS, ToolCall("lookup", {"term": "x, y", "limit": 2}),
                 ToolCall("copy_file", {"src": "{a}", "dst": "c:\\d"})],
}


@pytest.mark.parametrize("calls", CALLS.values(), ids=CALLS)
@pytest.mark.parametrize("family", FAMILIES.values(), ids=FAMILIES)
def test_invented_families_with_json_arguments_read_exactly(family, calls):
    template, sep = family
    text = sep.join(template.format(name=c.name, args=json.dumps(c.arguments)) for c in calls)
    assert _anchored(text) == calls, text
    assert _upstream(text) == calls, text


@pytest.mark.parametrize("text", [
    'Use tool get_weather with {"city": "Paris", "days": 3}',
    'I could call get_weather; it takes {"city": "Paris"}',
    'I could call get_weather; it takes {"city": ...}',
    'I would call get_weather like this:\n§ARGS§: {"city": "Paris"}',
    '§CALL§: get_weather; it takes {"city": "Paris", "days": 3}',
    '§CALL§: get_weather\n§ARGS§: {"city": "Paris", "country": "FR"}',
    'Draft (not sent): get_weather with {"city": "Paris"}',
])
def test_prose_drafts_and_foreign_keys_are_not_calls(text):
    assert _anchored(text) == [], text
    assert _upstream(text) == [], text


def test_keys_inside_a_json_object_are_never_read_by_literals_cut_through_it():
    text = '%% get_weather\n%% {"city": "Oslo, Norway", "days": 2}\n%% get_weather\n%% {"city": "Rome", "days": 1}'
    assert _anchored(text) == [ToolCall("get_weather", {"city": "Oslo, Norway", "days": 2}),
                               ToolCall("get_weather", {"city": "Rome", "days": 1})]


@pytest.mark.parametrize("text", [
    '§CALL§: get_weather\n§ARGS§: {"city": "Paris", "days": 3',
    '§CALL§: get_weather\n§ARGS§: {"city": "Paris",\n "days": 3',
    '§CALL§: get_weather\n§ARGS§: "city": "Paris", "days": 3',
])
def test_a_value_holding_a_quoted_string_and_the_comma_after_it_is_never_read(text):
    assert _anchored(text) == [], text


@pytest.mark.parametrize("text", [
    "§CALL§: get_weather\n§ARGS§: {'city': 'Paris', 'days': 3}",
    '§CALL§: get_weather\n§ARGS§: {city: "Paris", days: 3}',
    "§CALL§: get_weather\n§ARGS§: {city: 'Paris', days: 3}",
    "§CALL§: get_weather\n§ARGS§: {\n city: Paris\n days: 3\n}",
])
def test_an_object_a_json_repair_reads_cleanly_is_read(text):
    assert _anchored(text) == [PARIS], text


@pytest.mark.parametrize("text, want", [
    ("@@get_weather {city: Paris, days: 3}@@", [PARIS]),
    ("@@get_weather {city: Paris, days: 3}@@ @@copy_file {src: a.txt, dst: b.txt}@@",
     [PARIS, ToolCall("copy_file", {"src": "a.txt", "dst": "b.txt"})]),
    # the repair reads one value where two keys are shown: that call is not read
    ("@@get_weather {city: Paris, France, days: 3}@@ @@copy_file {src: a.txt, dst: b.txt}@@",
     [ToolCall("copy_file", {"src": "a.txt", "dst": "b.txt"})]),
])
def test_an_object_with_no_quotes_inline_is_read_by_the_repair_not_cut_at_its_commas(text, want):
    assert _anchored(text) == want, text
