"""Regression tests for misreadings found with real model outputs (each test names the shape it covers)."""

from __future__ import annotations

from refiner import formats
from refiner.calls import ToolCall
from refiner.pipeline import Refiner


def test_an_empty_list_inside_pythonic_calls_is_not_an_empty_nestful_answer():
    text = "[do_something_cool(steps=[])]"
    assert formats.detect_format(text) == "llama4_pythonic"  # a bare pythonic list is a strictly valid Llama 4 answer
    for fmt in (None, "toolace"):
        res = Refiner().refine({"upstream": text, **({"format": fmt} if fmt else {})})
        assert res["calls"] == [{"name": "do_something_cool", "arguments": {"steps": []}}], res
    # the empty call list is still the whole answer "[]"
    assert formats.get("nestful").parse_strict("[]") == []
    assert formats.get("nestful").parse_strict("<think>none needed</think>\n[]") == []


def test_two_objects_in_one_tool_call_block_are_two_calls():
    text = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Dallas"}}\n'
            '{"name": "get_weather", "arguments": {"city": "Orlando"}}\n</tool_call>')
    assert formats.detect_format(text) == "hermes"
    got = formats.get("hermes").parse_lenient(text)
    assert got.calls == [ToolCall("get_weather", {"city": "Dallas"}), ToolCall("get_weather", {"city": "Orlando"})]
    assert not got.ok  # not strictly valid Hermes (one object per block): reported
    res = Refiner().refine({"upstream": text})
    assert [c["arguments"]["city"] for c in res["calls"]] == ["Dallas", "Orlando"]
    assert res["stage"] == "repaired"


def test_arguments_written_beside_the_name_are_kept_not_dropped():
    res = Refiner().refine({"upstream": '{"name": "test", "value": 123}'})
    assert res["calls"] == [{"name": "test", "arguments": {"value": 123}}]
    got = formats.get("hermes").parse_lenient('{"name": "test", "value": 123}')
    assert any(p.code == "flat_arguments" for p in got.problems)
    # metadata keys are not arguments
    got = formats.get("openai").parse_lenient('[{"id": "c1", "type": "function", "function": {"name": "f"}}]')
    assert got.calls == [ToolCall("f", {})]


def test_numbers_a_float_cannot_hold_never_reach_the_calls_as_infinity():
    import json
    import math

    for text in ('<func_call>[{"name": "calc", "arguments": {"x": 1e999}}]</func_call>', "[calc(x=1e999)]",
                 "<function_list>[calc(x=-1e999)]</function_list>", '<tool_call>{"name": "calc", "arguments": '
                 '{"x": NaN}}</tool_call>'):
        res = Refiner().refine({"upstream": text})
        json.dumps(res["calls"], allow_nan=False)  # valid JSON
        for c in res["calls"]:
            assert not any(isinstance(v, float) and not math.isfinite(v) for v in c["arguments"].values())
        assert res["calls"] and res["calls"][0]["name"] == "calc", (text, res["calls"])
    for text in ("<function_list>[calc(x=1e999)]</function_list>", "[calc(x=1e999)]"):
        assert not formats.get("toolace").is_valid(text)
