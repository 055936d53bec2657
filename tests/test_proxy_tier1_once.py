"""Tier 1 runs once per choice in the proxy: a choice that goes on to the model is handed to it as the job its worker
prepared (:meth:`refiner.pipeline.Job.sendable`), not read and repaired again. Counted by wrapping the pipeline's
tier-1 entry point (:func:`refiner.pipeline.repair_parsed`) and counting its runs on each upstream text."""

from __future__ import annotations

import json
import pickle
from collections import Counter

import httpx
import pytest
from fake_upstream import WEATHER_QUERY, WEATHER_TOOLS, create_fake_upstream, serve_in_thread

from refiner import pipeline
from refiner.pipeline import Job, Refiner
from refiner.proxy import create_app, work
from refiner.proxy.convert import upstream_text

UNKNOWN = [{"id": "call_u", "type": "function", "function": {"name": "book_flight", "arguments": '{"to": "Paris"}'}}]
CONTENT = 'Let me check.\n<tool_call>\n{"name": "book_flight", "arguments": {"to": "Paris"}}\n</tool_call>'
MODEL_ANSWER = '<func_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</func_call>'


class Engine:
    """Answers every conversation with one corrected call; counts the conversations it is given."""

    def __init__(self) -> None:
        self.conversations = 0

    def chat(self, conversations: list, **kw) -> list[list[str]]:
        self.conversations += len(conversations)
        return [[MODEL_ANSWER] for _ in conversations]


@pytest.fixture
def tier1_runs(monkeypatch) -> Counter:
    """Runs of tier 1, by the upstream text it repaired."""
    runs: Counter = Counter()
    original = pipeline.repair_parsed

    def counted(report, text, *args, **kwargs):
        runs[text] += 1
        return original(report, text, *args, **kwargs)

    monkeypatch.setattr(pipeline, "repair_parsed", counted)
    return runs


@pytest.fixture(scope="module")
def upstream():
    with serve_in_thread(create_fake_upstream()) as url:
        yield url


@pytest.mark.parametrize("fake,text", [
    ({"tool_calls": [{"name": "book_flight", "arguments": '{"to": "Paris"}', "id": "call_u"}]}, upstream_text(UNKNOWN)),
    ({"content": CONTENT}, CONTENT.split("\n", 1)[1]),
], ids=["tool_calls", "content"])
def test_a_choice_that_goes_to_the_model_runs_tier_1_once(upstream, tier1_runs, fake, text) -> None:
    engine = Engine()
    body = {"model": "m", "messages": [{"role": "user", "content": WEATHER_QUERY}], "tools": WEATHER_TOOLS,
            "x_fake": fake}
    with serve_in_thread(create_app(upstream + "/v1", refiner=Refiner(engine), workers=0)) as url:
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    assert r.headers["x-tool-refiner"] == "model" and engine.conversations == 1
    call = r.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "Paris"})
    assert tier1_runs[text] == 1, tier1_runs


@pytest.mark.parametrize("arguments", ['{"to": "Paris"}', '{"to": "Paris"'], ids=["valid", "broken"])
def test_a_job_sent_back_from_a_worker_refines_as_the_request_would(tier1_runs, arguments) -> None:
    """The worker's job, pickled without its tools and conversation and given them back, gets the result the whole
    request gets, with no second tier-1 run on its upstream."""
    calls = [{**UNKNOWN[0], "function": {"name": "book_flight", "arguments": arguments}}]
    request = {"tools": WEATHER_TOOLS, "query": WEATHER_QUERY, "upstream": upstream_text(calls), "format": "openai"}
    expected = Refiner(Engine()).refine(request)
    tier1_runs.clear()
    (outcome,) = work.tier1(Refiner(engine=None), [{"request": {k: v for k, v in request.items() if k != "query"},
                                                    "model": True}])
    job = pickle.loads(pickle.dumps(outcome["job"]))
    assert isinstance(job, Job) and "tools" not in job.request and "query" not in job.request and job.tools is None
    assert Refiner(Engine()).refine_batch([job.rejoined(request)]) == [expected]
    assert tier1_runs[request["upstream"]] == 1, tier1_runs
    # a choice that does not need the model comes back without its job
    fine = upstream_text([{"id": "c", "type": "function", "function": {"name": "get_weather",
                                                                        "arguments": '{"city": "Paris"}'}}])
    (outcome,) = work.tier1(Refiner(engine=None), [{"request": {**request, "upstream": fine}, "model": True}])
    assert "job" not in outcome and outcome["result"]["stage"] == "unchanged"
