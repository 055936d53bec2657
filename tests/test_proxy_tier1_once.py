"""Tier 1 runs once per choice in the proxy: a choice that goes on to the model is handed to it as the job its worker
prepared (:meth:`refiner.pipeline.Job.sendable`), not read and repaired again; a streamed answer whose text was read
before it ended (its calls sent early) is not read again at its end, in the proxy and in the vLLM plugin. Counted by
wrapping the pipeline's tier-1 entry point (:func:`refiner.pipeline.repair_parsed`) and counting its runs on each
upstream text."""

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


def streamed(url: str, body: dict) -> list[dict]:
    with httpx.stream("POST", url + "/v1/chat/completions", json={**body, "stream": True}, timeout=60) as r:
        return [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]


@pytest.mark.parametrize("model", [False, True], ids=["tier 1", "model"])
@pytest.mark.parametrize("fake,text", [
    ({"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}', "id": "call_w"}]},
     upstream_text([{"id": "call_w", "type": "function", "function": {"name": "get_weather",
                                                                      "arguments": '{"city": "Paris"}'}}])),
    ({"content": CONTENT.replace("book_flight", "get_weather").replace('"to"', '"city"')},
     CONTENT.split("\n", 1)[1].replace("book_flight", "get_weather").replace('"to"', '"city"')),
], ids=["tool_calls", "content"])
def test_a_streamed_answer_read_early_is_not_read_again_at_its_end(upstream, tier1_runs, fake, text, model) -> None:
    """The calls are complete before the answer ends (read early, and sent when no model would take them); the end
    takes that read: one tier-1 run on the text, the calls as a whole answer gives them."""
    engine = Engine() if model else None
    body = {"model": "m", "messages": [{"role": "user", "content": WEATHER_QUERY}], "tools": WEATHER_TOOLS,
            "x_fake": fake, "chat_template_kwargs": {"enable_thinking": False}}
    with serve_in_thread(create_app(upstream + "/v1", refiner=Refiner(engine), workers=0)) as url:
        chunks = streamed(url, body)
        whole = httpx.post(url + "/v1/chat/completions", json=body, timeout=60).json()
    deltas = [t for c in chunks if c.get("choices") for t in c["choices"][0]["delta"].get("tool_calls", [])]
    assert [t["function"]["name"] for t in deltas if t["function"].get("name")] == ["get_weather"]
    assert json.loads("".join(t["function"].get("arguments") or "" for t in deltas)) == {"city": "Paris"}
    assert whole["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert tier1_runs[text] == 2, tier1_runs  # once for the stream, once for the whole answer


def test_the_vllm_plugin_does_not_read_an_answer_again_at_its_end(tier1_runs) -> None:
    from refiner.proxy.vllm_plugin import Reader  # (imported here: imported before vLLM, it would not register)

    text = CONTENT.split("\n", 1)[1].replace("book_flight", "get_weather").replace('"to"', '"city"')
    reader = Reader(WEATHER_TOOLS, Refiner(engine=None))
    sent = []
    for i in range(0, len(text), 4):
        sent += reader.feed(text[i : i + 4])[1]
    _, calls = reader.end()
    assert sent == calls == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert tier1_runs[text] == 1, tier1_runs
