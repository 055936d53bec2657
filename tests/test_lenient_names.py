"""A JSON call's name must look like a tool name: a name repaired out of markup is no call, honest names stay."""

import json
import sys
from pathlib import Path

import pytest

from refiner import formats

sys.path.insert(0, str(Path(__file__).parent))
import hostile

JSON_ROWS = ("hermes", "apibank", "gigachat3", "gigachat31", "granite", "granite_20b_fc", "mistral",
             "mistral_tekken", "phi4_mini", "rwkv")


@pytest.mark.parametrize("family", JSON_ROWS)
def test_tag_storm_names_no_markup(family):
    text = dict(hostile.storms(3000))["tag_storm"]
    out = formats.get(family).parse_lenient(text)
    assert not [c.name for c in out.calls if set(c.name) & set("<>{}\"'")]


def hermes_read(item):
    return formats.get("hermes").parse_lenient(f"<tool_call>\n{json.dumps(item)[:-1]}")  # cut: read leniently


@pytest.mark.parametrize("name", [
    "begin_calls|><|begin_call|>",
    "<tool_call>",
    "lookup</name>",
    "f{x}",
    'say "hi"',
    "a\nb",
])
def test_markup_name_is_no_call(name):
    out = hermes_read({"name": name, "arguments": {}})
    assert not out.calls
    assert "bad_name" in [p.code for p in out.problems]


def test_markup_name_under_function_is_no_call():
    out = hermes_read({"function": "open|><|next_marker|>"})
    assert not out.calls
    assert "bad_name" in [p.code for p in out.problems]


@pytest.mark.parametrize("name", ["weather.lookup", "send-mail", "Files.read_v2", "ns:tool", "get weather now",
                                  "pipe|ok"])
def test_honest_names_stay(name):
    out = hermes_read({"name": name, "arguments": {"city": "Oslo"}})
    assert [(c.name, c.arguments) for c in out.calls] == [(name, {"city": "Oslo"})]
    assert "bad_name" not in [p.code for p in out.problems]


def test_repaired_unquoted_markup_in_hermes_is_no_call():
    text = '<tool_call>\n{"name": <|tool_call_begin|><|tool_call_end|>, "arguments": {}}\n</tool_call>'
    out = formats.get("hermes").parse_lenient(text)
    assert not out.calls
    assert "bad_name" in [p.code for p in out.problems]


def test_spaced_name_in_hermes_stays():
    text = '<tool_call>\n{"name": "get weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    out = formats.get("hermes").parse_lenient(text)
    assert [(c.name, c.arguments) for c in out.calls] == [("get weather", {"city": "Oslo"})]
