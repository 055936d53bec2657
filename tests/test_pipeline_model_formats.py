"""The model path for dialects the refiner was not trained on: the model is shown the upstream's calls in the closest
trained format, answers in it, and the answer comes back in the upstream's own dialect."""

from __future__ import annotations

import json

from test_pipeline import ScriptedEngine

from refiner import formats
from refiner.calls import ToolCall
from refiner.pipeline import Refiner

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}]
# an unknown tool no snap reaches: tier 1 cannot fix it, so the model runs
BROKEN = [ToolCall("lookup_forecast_now", {"city": "Paris"})]
FIXED = [ToolCall("get_weather", {"city": "Paris", "days": 2})]


def test_every_untrained_format_has_a_trained_view_that_carries_its_calls():
    for fmt in formats.all_formats():
        view = formats.model_view(fmt)
        assert view.trained
        assert view is fmt or (fmt.names_only == view.names_only and bool(fmt.outputs) <= bool(view.outputs)), fmt.name
        assert view is fmt or view.pythonic == fmt.pythonic, fmt.name  # XML and JSON dialects are shown as JSON


def test_untrained_output_format_goes_through_a_trained_view_and_back():
    upstream_fmt = formats.get("openai")
    assert not upstream_fmt.trained
    view = formats.model_view(upstream_fmt)
    engine = ScriptedEngine([view.render(FIXED)])
    res = Refiner(engine=engine).refine({"tools": TOOLS, "query": "Weather in Paris for 2 days?",
                                         "upstream": upstream_fmt.render(BROKEN)})
    prompt = engine.calls[0]["conversations"][0][-1]["content"]
    assert view.render(BROKEN) in prompt and f"in the {view.name} format" in prompt
    assert upstream_fmt.render(BROKEN) not in prompt
    assert res["stage"] == "model" and res["format"] == "openai"
    assert upstream_fmt.parse_strict(res["refined"]) == FIXED
    assert res["calls"] == [c.to_dict() for c in FIXED]


def test_a_trained_output_format_is_shown_as_it_is():
    fmt = formats.get("hermes")
    engine = ScriptedEngine([fmt.render(FIXED)])
    res = Refiner(engine=engine).refine({"tools": TOOLS, "upstream": fmt.render(BROKEN)})
    prompt = engine.calls[0]["conversations"][0][-1]["content"]
    assert fmt.render(BROKEN) in prompt and res["refined"] == fmt.render(FIXED)


def test_model_formats_option_names_what_the_deployed_model_knows():
    fmt = formats.get("openai")
    engine = ScriptedEngine([fmt.render(FIXED)])
    res = Refiner(engine=engine, model_formats=["openai", "xlam"]).refine(
        {"tools": TOOLS, "upstream": fmt.render(BROKEN)})
    prompt = engine.calls[0]["conversations"][0][-1]["content"]
    assert "in the openai format" in prompt and json.loads(res["refined"])["tool_calls"]
    assert res["stage"] == "model"


def test_an_answer_in_the_wrong_format_falls_back():
    engine = ScriptedEngine(["I think the tool is get_weather."])
    res = Refiner(engine=engine).refine({"tools": TOOLS, "upstream": formats.get("openai").render(BROKEN)})
    assert res["stage"] == "fallback" and res["format"] == "openai"
