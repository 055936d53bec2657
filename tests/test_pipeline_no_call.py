"""What counts as no call (docs/formats.md, "What counts as no call"): one test per case, pinning what ``refine`` does
(tier 1 only, tools offered), and the ``unknown_tools`` option each way."""

from __future__ import annotations

import json

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.pipeline import Refiner

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]
PARIS = {"name": "get_weather", "arguments": {"city": "Paris"}}


def block(call: dict | str) -> str:
    return "<tool_call>\n" + (call if isinstance(call, str) else json.dumps(call)) + "\n</tool_call>"


def refine(upstream: str, refiner: Refiner | None = None, **request) -> dict:
    return (refiner or Refiner()).refine({"tools": TOOLS, "query": "", "upstream": upstream, **request})


def codes(findings: list[dict]) -> list[str]:
    return [f["code"] for f in findings]


ROCKET = block({"name": "launch_rocket", "arguments": {"target": "moon"}})


def test_an_unknown_tool_is_kept_by_default_and_flagged():
    res = refine(ROCKET)
    assert res["calls"] == [{"name": "launch_rocket", "arguments": {"target": "moon"}}]
    assert res["stage"] == "unchanged" and res["refined"] == ROCKET and codes(res["diagnostics"]) == ["unknown_tool"]


def test_unknown_tools_drop_removes_the_call_and_says_so():
    dropping = Refiner(unknown_tools="drop")
    res = refine(ROCKET, dropping)
    assert res["calls"] == [] and res["refined"] == "" and res["stage"] == "repaired"
    assert codes(res["actions"]) == ["drop_unknown_tool"] and codes(res["diagnostics"]) == ["no_calls"]
    res = refine(ROCKET + "\n" + block(PARIS), dropping)  # the offered one stays, written alone
    assert res["calls"] == [PARIS] and formats.get("hermes").parse_strict(res["refined"])[0].name == "get_weather"
    assert [(a["code"], a["call"], a["tool"]) for a in res["actions"]] == [("drop_unknown_tool", 0, "launch_rocket")]
    res = refine(block({"name": "get_wether", "arguments": {"city": "Paris"}}), dropping)  # near an offered name
    assert res["calls"] == [PARIS] and codes(res["actions"]) == ["snap_tool"]
    res = dropping.refine({"query": "", "upstream": ROCKET})  # no tool list: nothing is known to be unoffered
    assert res["calls"] == [{"name": "launch_rocket", "arguments": {"target": "moon"}}]
    with pytest.raises(ValueError, match="unknown_tools"):
        Refiner(unknown_tools="forward")


def test_a_block_not_closed_at_a_normal_stop_is_read_when_it_stops_after_a_whole_value():
    text = block(PARIS).removesuffix("\n</tool_call>")
    res = refine(text, finish_reason="stop")
    assert res["calls"] == [PARIS] and res["stage"] == "repaired" and codes(res["actions"]) == ["parse_repair"]
    res = refine(text[:-5], finish_reason="stop")  # stopped mid-value: cut, never completed
    assert res["calls"] == [] and res["stage"] == "truncated"
    res = refine(text, finish_reason="length")  # at the token limit: reported as cut, the whole call kept
    assert res["calls"] == [PARIS] and res["stage"] == "truncated"


@pytest.mark.parametrize("upstream", [
    block({"name": "get_weather"}),
    "<tool_call>get_weather</tool_call>",
    "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>",
])
def test_a_name_with_no_arguments_is_a_call_with_none_flagged_when_the_tool_needs_some(upstream):
    res = refine(upstream)
    assert res["calls"] == [{"name": "get_weather", "arguments": {}}]
    assert res["stage"] == "unchanged" and codes(res["diagnostics"]) == ["missing_required"]
    res = refine(upstream.replace("get_weather", "get_time"))  # a tool that takes no argument: a valid call
    assert res["calls"] == [{"name": "get_time", "arguments": {}}] and res["diagnostics"] == []


def test_values_json_cannot_hold():
    res = refine(block('{"name": "get_weather", "arguments": {"city": "Paris", "days": 1e999}}'))
    assert res["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris", "days": "Infinity"}}]
    assert codes(res["upstream_diagnostics"]) == ["format", "type"] and codes(res["diagnostics"]) == ["type"]
    res = refine(block('{"name": "get_weather", "arguments": {"city": 1e999}}'))
    assert res["calls"] == [{"name": "get_weather", "arguments": {"city": "Infinity"}}] and res["diagnostics"] == []
    res = refine("[get_weather(city=b'Paris')]")
    assert res["calls"] == [PARIS] and codes(res["upstream_diagnostics"]) == ["format"]


def test_a_call_drafted_in_reasoning_is_no_call_unless_asked_for():
    text = "<think>I could call " + block(PARIS) + " but first ask.</think>Which city do you mean?"
    res = refine(text)
    assert res["calls"] == [] and codes(res["diagnostics"]) == ["format", "no_calls"]
    assert refine(text, calls_in_reasoning=True)["calls"] == [PARIS]


@pytest.mark.parametrize("upstream", [
    "To get the weather you would send:\n```\n" + block(PARIS) + "\n```\nShall I?",
    'You can call `get_weather(city="Paris")` yourself.',
    'The call would be {"name": "get_weather", "arguments": {"city": "Paris"}} but I need your consent.',
])
def test_a_call_quoted_in_an_answer_is_read_as_a_call(upstream):
    """Today's behaviour, which the rule "never a call from a quote" does not yet hold (docs/formats.md)."""
    assert refine(upstream)["calls"] == [PARIS]


@pytest.mark.parametrize(("upstream", "fmt", "read_as"), [
    ('<tool_call>[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_call>', None, "mistral_tekken"),
    ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>", "hermes",
     "hermes"),
    ('[TOOL_CALLS]<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>', "mistral",
     "mistral"),
])
def test_a_strict_familys_layout_mixed_with_anothers_is_read_by_the_inner_one(upstream, fmt, read_as):
    res = refine(upstream, format=fmt)
    assert res["calls"] == [PARIS] and res["format"] == read_as and res["diagnostics"] == []


def _lost_first(fmt: str, slip: tuple[str, str]) -> str:
    """Two calls in ``fmt``, the first one's token between name and arguments written as ``slip[1]``."""
    good = formats.get(fmt).render([ToolCall("get_weather", {"city": "Oslo"}),
                                    ToolCall("get_weather", {"city": "Paris"})])
    assert slip[0] in good
    return good.replace(slip[0], slip[1], 1)


LOST = {  # a call block no reading can take as a call: its name holds markup, or nothing in it is a call
    "mistral_v11": ("[ARGS]", "<|tool_arg:"),
    "deepseek_v31": ("<｜tool▁sep｜>", "<|close|>argument<|sep|>"),
    "solar_open2": ("<|tool_arg:start|>", "start|>"),
}


@pytest.mark.parametrize("fmt", LOST)
def test_a_call_block_that_cannot_be_read_is_left_out_and_reported(fmt):
    upstream = _lost_first(fmt, LOST[fmt])
    res = refine(upstream, format=fmt)
    assert res["calls"] == [PARIS]
    assert res["stage"] == "repaired" and "lost_call" in codes(res["diagnostics"])  # not a silent pass
    good = formats.get(fmt).render([ToolCall("get_weather", {"city": "Paris"})])
    assert "lost_call" not in codes(refine(good, format=fmt)["diagnostics"])


def test_a_lost_call_block_sends_the_choice_to_the_model_which_sees_it_as_written():
    shown: list[str] = []

    class Engine:
        def chat(self, conversations, **_):
            shown.extend(c[-1]["content"] for c in conversations)
            calls = [ToolCall("get_weather", {"city": c}) for c in ("Oslo", "Paris")]
            return [[formats.get("xlam").render(calls)] for _ in conversations]

    upstream = _lost_first("mistral_v11", LOST["mistral_v11"])
    res = refine(upstream, Refiner(Engine(), model_formats=["xlam"]), format="mistral_v11")
    assert len(shown) == 1 and upstream in shown[0]  # (not the one call read, rendered in xlam)
    assert res["stage"] == "model" and [c["arguments"]["city"] for c in res["calls"]] == ["Oslo", "Paris"]
