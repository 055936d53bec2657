"""Rows added from engines other than vLLM, SGLang and llama.cpp (TGI's tool grammar, mlx-lm's Gemma 4 JSON calls):
each names its own text in detection, reads it back, and leaves the texts of its neighbours as they were."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats.base import RenderError
from refiner.pipeline import Refiner

CALL = ToolCall("plan_route", {"start": "Ghent", "stops": ["Bruges", "Ostend"], "avoid_tolls": True})


def test_a_rendered_tgi_call_is_detected_and_read_back():
    tgi = formats.get("tgi")
    text = tgi.render([CALL])
    assert text == '{"function": {"_name": "plan_route", "start": "Ghent", "stops": ["Bruges", "Ostend"], ' \
                   '"avoid_tolls": true}}'
    assert formats.detect_format(text) == "tgi"
    assert tgi.parse_strict(text) == [CALL]


def test_tgi_arguments_are_the_keys_beside_the_name_whatever_they_are_called():
    text = '{"function": {"_name": "fill", "arguments": [1, 2], "name": "grid"}}'
    assert formats.get("tgi").parse_strict(text) == [ToolCall("fill", {"arguments": [1, 2], "name": "grid"})]


def test_tgis_no_tool_is_a_text_answer():
    text = '{"function": {"_name": "no_tool", "content": "Ghent is an hour from Ostend by train."}}'
    assert formats.detect_format(text) == "tgi"
    assert formats.get("tgi").parse_strict(text) == []
    assert Refiner().refine({"upstream": text})["calls"] == []


def test_tgis_outer_brace_is_required_strictly_and_restored_leniently():
    text = '{"function": {"_name": "plan_route", "start": "Ghent"}'
    result = Refiner().refine({"upstream": text})
    assert result["format"] == "tgi"
    assert result["calls"] == [{"name": "plan_route", "arguments": {"start": "Ghent"}}]
    assert any(d["code"] == "format" for d in result["upstream_diagnostics"])


def test_call_objects_under_a_function_key_without_tgis_name_key_stay_where_they_were():
    nested = '{"function": {"name": "plan_route", "arguments": {"start": "Ghent"}}}'
    listed = f"[{nested}]"
    message = '{"tool_calls": [{"function": {"name": "plan_route", "arguments": "{}"}}]}'
    assert formats.detect_format(nested) is None
    assert formats.detect_format(listed) == formats.detect_format(message) == "openai"
    assert Refiner().refine({"upstream": nested})["calls"] == [{"name": "plan_route", "arguments": {"start": "Ghent"}}]


def test_gemma4_json_calls_write_argument_strings_between_quote_tokens_and_read_both_quotes():
    fg4 = formats.get("function_gemma4")
    text = fg4.render([CALL])
    assert text == ('<|tool_call>{"name": "plan_route", "arguments": {"start": <|"|>Ghent<|"|>, '
                    '"stops": [<|"|>Bruges<|"|>, <|"|>Ostend<|"|>], "avoid_tolls": true}}<tool_call|>')
    assert formats.detect_format(text) == "function_gemma4"
    assert fg4.parse_strict(text) == [CALL]
    plain = '<|tool_call>{"name": "plan_route", "arguments": {"start": "Ghent", "note": <|"|>say "hi"\\n<|"|>}}<tool_call|>'
    assert fg4.parse_strict(plain) == [ToolCall("plan_route", {"start": "Ghent", "note": 'say "hi"\\n'})]
    with pytest.raises(RenderError):
        fg4.render([ToolCall("f", {"q": 'a <|"|> b'})])


def test_gemma4_json_calls_cut_in_a_quote_token_string_are_left_out():
    got = formats.get("function_gemma4").parse_lenient(
        '<|tool_call>{"name": "plan_route", "arguments": {"start": <|"|>Ghent<|"|>}}<tool_call|>'
        '<|tool_call>{"name": "plan_route", "arguments": {"start": <|"|>Bru')
    assert got.cut is not None and got.cut.index == 1 and got.calls[0] == ToolCall("plan_route", {"start": "Ghent"})
    inside = formats.get("function_gemma4").parse_lenient(
        '<|tool_call>{"name": "plan_route", "arguments": {"start": <|"|>Ghent<|"|>, "via": <|"')
    assert inside.cut is not None and inside.cut.arguments == {"start": "Ghent"}


def test_gemma4_call_syntax_stays_gemma4s():
    text = '<|tool_call>call:plan_route{start:<|"|>Ghent<|"|>}<tool_call|>'
    assert formats.detect_format(text) == "gemma4"
    assert Refiner().refine({"upstream": text})["calls"] == [{"name": "plan_route", "arguments": {"start": "Ghent"}}]
