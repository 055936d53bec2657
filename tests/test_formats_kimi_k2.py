"""Kimi-K2 tool calls (the named-JSON row of refiner/formats/catalog.py): the template's exact text, call ids,
grammar edge cases and recovery."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import FormatError
from refiner.pipeline import Refiner

K = formats.get("kimi_k2")
SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CB, AB, CE = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"


def test_render_numbers_the_calls_in_order():
    calls = [ToolCall("get_weather", {"city": "北京"}), ToolCall("get_weather", {"city": "上海"}), ToolCall("t", {})]
    assert K.render(calls) == (
        f'{SB}{CB}functions.get_weather:0{AB}{{"city": "北京"}}{CE}{CB}functions.get_weather:1{AB}{{"city": "上海"}}{CE}'
        f"{CB}functions.t:2{AB}{{}}{CE}{SE}"
    )


def test_call_ids():
    """The name lies between ``functions.`` and the last ``:`` (dots and colons kept); an id without its prefix or
    its index is read by recovery and reported."""
    for call_id, name in (("functions.get_weather:0", "get_weather"), ("functions.github.create_issue:12",
                          "github.create_issue"), ("functions.ns:tool:3", "ns:tool")):
        assert K.parse_strict(f"{SB}{CB}{call_id}{AB}{{}}{CE}{SE}") == [ToolCall(name, {})]
    for call_id in ("get_weather:0", "functions.get_weather"):
        got = K.parse_lenient(f"{SB}{CB}{call_id}{AB}{{}}{CE}{SE}")
        assert got.calls == [ToolCall("get_weather", {})] and "bad_name" in {p.code for p in got.problems}


def test_indices_need_not_start_at_zero_and_order_is_the_texts():
    text = f'Sure.{SB}\n{CB} functions.b:7 {AB} {{"x": 1}} {CE}\n{CB}functions.a:8{AB}{{}}{CE}\n{SE}'
    assert K.parse_strict(text) == [ToolCall("b", {"x": 1}), ToolCall("a", {})]


def test_tokens_inside_strings_are_text():
    call = ToolCall("say", {"text": CE + SE + AB, "n": [1, {"k": None}]})
    assert K.parse_strict(K.render([call])) == [call]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"{SB}{CB}get_weather:0{AB}{{}}{CE}{SE}", "expected functions\\."),
        (f"{SB}{CB}functions.get_weather{AB}{{}}{CE}{SE}", "not functions.NAME:INDEX"),
        (f"{SB}{CB}functions.get_weather:x{AB}{{}}{CE}{SE}", "not functions.NAME:INDEX"),
        (f"{SB}{CB}functions.get weather:0{AB}{{}}{CE}{SE}", "not allowed"),
        (f"{SB}{CB}functions.f:0{AB}[]{CE}{SE}", "must be a JSON object"),
        (f"{SB}{CB}functions.f:0{AB}{{}}{SE}", "expected <\\|tool_call_end\\|>"),
        (f"{SB}{CB}functions.f:0{AB}{{}}{CE}", "missing <\\|tool_calls_section_end\\|>"),
    ],
)
def test_strict_errors(text, message):
    with pytest.raises(FormatError, match=message):
        K.parse_strict(text)


def test_recovery():
    cut = K.parse_lenient(f'{SB}{CB}functions.a:0{AB}{{"x": 1}}{CE}{CB}functions.b:1{AB}{{"y": "hel')
    assert cut.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {"y": "hel"})]
    in_id = K.parse_lenient(f"{SB}{CB}functions.a:0{AB}{{}}{CE}{CB}functions.get_wea")
    assert in_id.calls == [ToolCall("a", {})]
    no_prefix = K.parse_lenient(f'{SB}{CB}a:0{AB}{{"x": 1}}{CE}{SE}')
    assert no_prefix.calls == [ToolCall("a", {"x": 1})] and "bad_name" in {p.code for p in no_prefix.problems}
    singular = K.parse_lenient(f'<|tool_call_section_begin|>{CB}functions.a:0{AB}{{"x": 1}}{CE}<|tool_call_section_end|>')
    assert singular.calls == [ToolCall("a", {"x": 1})] and singular.problems
    assert formats.detect_format(f'<|tool_call_section_begin|>{CB}functions.a:0{AB}{{}}{CE}') == "kimi_k2"
    lost_begin = K.parse_lenient(f'{SB}functions.a:0{AB}{{"x": 1}}{CE}{CB}functions.b:1{AB}{{}}{CE}{SE}')
    assert lost_begin.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {})]
    python_json = K.parse_lenient(f"{SB}{CB}functions.a:0{AB}{{'x': 'y'}}{CE}{SE}")
    assert python_json.calls == [ToolCall("a", {"x": "y"})]


def test_hostile_inputs_give_problems_not_errors():
    for text in [CB * 7_000, AB * 6_000, (CB + "functions.a:0" + AB + "{") * 4_000, SB + "functions." * 15_000,
                 SB + (CB + "x:1") * 10_000]:
        got = K.parse_lenient(text)
        assert not [p for p in got.problems if p.code == "internal"]
        assert got.ok == K.is_valid(text)


def test_misspelt_tokens_are_read_as_the_tokens():
    want = [ToolCall("a", {"x": 1}), ToolCall("b", {})]
    for bad in ("[|tool_call_end|]", "<|tool_call_end|", "<|TOOL_CALL_END|>", "<|toolcall_end|>", "<|tool-call_end|>"):
        got = K.parse_lenient(f'{SB}{CB}functions.a:0{AB}{{"x": 1}}{bad}{CB}functions.b:1{AB}{{}}{CE}{SE}')
        assert got.calls == want, bad
        assert "missing_tag" in {p.code for p in got.problems}


def test_every_token_lost_the_call_ids_still_mark_the_calls():
    got = K.parse_lenient('functions.a.b:0{"x": 1}functions.c:1{"y": "z"}')
    assert got.calls == [ToolCall("a.b", {"x": 1}), ToolCall("c", {"y": "z"})]
    # an id without its arguments right after it, or an object with no id before it, is not a call
    assert K.parse_lenient('functions.a:0 means {"x": 1}').calls == []
    assert K.parse_lenient('It returned {"x": 1}.').calls == []


# Issue 20: ids that name no tool are not tool names.
TOOLS_SEVERAL = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": p}}}
                 for n, p in (("get_weather", {"city": {"type": "string"}}), ("get_time", {}))]
NO_NAME_IDS = ["functions.invalid.0", "0", "functions.7"]


@pytest.mark.parametrize("call_id", NO_NAME_IDS)
def test_an_id_that_names_no_tool_is_no_tool_name(call_id):
    kimi = formats.get("kimi_k2")
    text = (f"<|tool_calls_section_begin|><|tool_call_begin|>{call_id}<|tool_call_argument_begin|>"
            '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>')
    got = kimi.parse_lenient(text)
    assert got.calls == [] and "unnamed_call" in {p.code for p in got.problems}
    several = kimi.parse_lenient(text, tools={"get_weather": ["city"], "get_time": []})
    assert several.calls == [] and "unnamed_call" in {p.code for p in several.problems}
    # nor through the pipeline, where salvage reads what the format could not: the call's id is not a name there
    # either (it read `invalid.0` as one), and with one tool offered the call is that tool's
    assert Refiner().refine({"upstream": text})["calls"] == []
    assert Refiner().refine({"upstream": text, "tools": TOOLS_SEVERAL})["calls"] == []
    assert Refiner().refine({"upstream": text, "tools": TOOLS_SEVERAL[:1]})["calls"] == [
        {"name": "get_weather", "arguments": {"city": "Oslo"}}]
    one = kimi.parse_lenient(text, tools={"get_weather": ["city"]})  # the one offered tool, as vLLM settles it
    assert one.calls == [ToolCall("get_weather", {"city": "Oslo"})]
    assert any(p.code == "bad_name" and "one tool offered" in p.message for p in one.problems)


def test_a_name_with_digits_is_still_a_name():
    kimi = formats.get("kimi_k2")
    text = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.ipv4.lookup<|tool_call_argument_begin|>"
            '{"ip": "1.1.1.1"}<|tool_call_end|><|tool_calls_section_end|>')
    assert kimi.parse_lenient(text).calls == [ToolCall("ipv4.lookup", {"ip": "1.1.1.1"})]


def test_a_row_of_the_named_json_grammar():
    from refiner.formats import catalog
    from refiner.formats.named_json import NamedJson

    assert type(K).__bases__ == (NamedJson,) and K.spelling == catalog.KIMI_K2


def test_lost_section_tokens():
    got = K.parse_lenient(f'Sure. {CB}functions.a:0{AB}{{"x": 1}}{CE}{CB}functions.b:1{AB}{{}}{CE}')
    assert got.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {})]
    assert {p.message for p in got.problems if p.code == "missing_tag"} >= {f"missing {SB}", f"missing {SE}"}
