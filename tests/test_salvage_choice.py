"""Salvage's choice between its own reading and the format's lenient one (refiner.formats.reading.salvaged): a
reading whose calls carry markup in their names, keys or at the ends of their string values does not beat a clean
one for having more calls."""

from __future__ import annotations

import pytest

from refiner.calls import ToolCall
from refiner.formats.reading import _frayed, _score, params_by_tool
from refiner.pipeline import Refiner
from refiner.specs import load_tools

TOOLS = [{"type": "function", "function": {"name": "find_ferry", "parameters": {"type": "object", "properties": {
    "port": {"type": "string"}, "day": {"type": "string"}}}}}]
OFFERED = params_by_tool(load_tools(TOOLS))


@pytest.mark.parametrize("args", [
    {"port": "Vigo", "day": "Monday"},
    {"port": "St. John's", "day": "Tuesday (o'clock: 9)"},
    {"port": '"Cangas"', "day": "[1, 2]"},
    {"port": "{\"a\": [1]}", "day": "x, y"},
    {"port": 3, "day": None},
    {"port": '<tag>{"name": "x"', "day": 'a "quoted" word'},
])
def test_clean_calls_are_not_frayed(args):
    assert not _frayed(ToolCall("find_ferry", args))


@pytest.mark.parametrize("call", [
    ToolCall("find_ferry", {"port": "'Vigo", "day": "Monday"}),  # a quote opened and not closed
    ToolCall("find_ferry", {"port": '"Vigo", "', "day": "Monday"}),  # a quote closed before the end
    ToolCall("find_ferry", {"port": "Vigo", "day": "'Monday'}},"}),  # closing braces with no opening one
    ToolCall("find_ferry", {"'port'": "Vigo"}),  # a quote in a key
    ToolCall("find_ferry]", {"port": "Vigo"}),  # a bracket in the name
])
def test_markup_taken_for_text_frays_a_call(call):
    assert _frayed(call)


def test_one_clean_call_outranks_more_frayed_ones_and_a_frayed_call_outranks_none():
    clean = [ToolCall("find_ferry", {"port": "Vigo", "day": "Monday"})]
    frayed = [ToolCall("find_ferry", {"port": "'Vigo", "day": "'Monday'}},"}),
              ToolCall("find_ferry", {"port": "'Cangas", "day": "'Monday'}}"})]
    assert _score(clean, OFFERED) > _score(frayed, OFFERED)
    assert _score(frayed[:1], OFFERED) > _score([], OFFERED)
    assert _score(clean + frayed[1:], OFFERED) > _score(clean, OFFERED)


def test_python_quoted_tgi_calls_keep_their_values():
    text = ("{\"function\": {'_name': 'find_ferry', 'port': 'Vigo', 'day': 'Monday'}}, "
            "{'function': {'_name': 'find_ferry', 'port': 'Cangas', 'day': 'Monday'}}")
    got = Refiner().refine({"upstream": text, "tools": TOOLS, "format": "tgi"})
    assert got["calls"] == [{"name": "find_ferry", "arguments": {"port": "Vigo", "day": "Monday"}},
                            {"name": "find_ferry", "arguments": {"port": "Cangas", "day": "Monday"}}]
