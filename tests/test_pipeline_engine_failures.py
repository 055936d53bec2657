"""A failing model step costs only the requests that cause it: the batch is retried one request at a time and a
request whose engine call still fails falls back to its best result without the model (stage ``fallback``, the
engine error in ``reason`` and ``model_error``), never an exception. Request validation errors still raise."""

from __future__ import annotations

import json

import httpx
import pytest
from test_pipeline import GOOD, MISSING, TOOLS, tc

from refiner.eval.common import REFINER_FAILED, refine_safely
from refiner.pipeline import MAX_ERROR_CHARS, Refiner, RequestError

TYPO = GOOD.replace("get_weather", "get_wether")  # tier 1 snaps the tool name


def req(upstream: str, city: str = "Paris") -> dict:
    return {"tools": TOOLS, "query": f"Weather in {city} for 3 days?", "upstream": upstream}


def user_text(conversation: list[dict]) -> str:
    return "\n".join(m["content"] for m in conversation if m["role"] == "user")


class PickyEngine:
    """Answers every conversation with the complete call for the city its query names; raises ``error`` for the
    whole batch when any conversation mentions ``poison``, or, with ``max_batch``, when the batch is larger."""

    def __init__(self, poison: str | None = None, max_batch: int | None = None,
                 error: Exception | None = None) -> None:
        self.poison = poison
        self.max_batch = max_batch
        self.error = error or ValueError("prompt too long")
        self.batch_sizes: list[int] = []

    def chat(self, conversations, *, n=1, temperature=0.0, max_tokens=1024, enable_thinking=None, seed=None):
        self.batch_sizes.append(len(conversations))
        if self.max_batch is not None and len(conversations) > self.max_batch:
            raise self.error
        if self.poison is not None and any(self.poison in user_text(c) for c in conversations):
            raise self.error
        out = []
        for conv in conversations:
            city = user_text(conv).split("Weather in ", 1)[1].split(" for", 1)[0]
            out.append([tc("get_weather", city=city, days=3)] * n)
        return out


def test_one_failing_conversation_falls_back_and_the_others_get_model_answers():
    eng = PickyEngine(poison="Atlantis", error=ValueError("prompt of 9000 tokens exceeds max_model_len 4096"))
    requests = [req(MISSING, "Paris"), req(MISSING, "Atlantis"), req(MISSING, "Rome")]
    res = Refiner(eng).refine_batch(requests)
    assert eng.batch_sizes == [3, 1, 1, 1]  # the batch, then one request at a time
    assert [r["stage"] for r in res] == ["model", "fallback", "model"]
    assert res[0]["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]
    assert res[2]["calls"] == [{"name": "get_weather", "arguments": {"city": "Rome", "days": 3}}]
    bad = res[1]
    assert bad["model_error"] == "ValueError: prompt of 9000 tokens exceeds max_model_len 4096"
    assert "model step failed" in bad["reason"] and bad["model_error"] in bad["reason"]
    assert bad["refined"] == MISSING and not bad["changed"]  # the upstream: tier 1 cannot invent days
    assert [d["code"] for d in bad["diagnostics"]] == ["missing_required"]
    assert "model_error" not in res[0] and "model_error" not in res[2]
    json.dumps(res)


def test_an_engine_that_rejects_every_batch_larger_than_one_still_answers_every_request():
    eng = PickyEngine(max_batch=1, error=RuntimeError("batching unsupported"))
    cities = ["Paris", "Rome", "Oslo", "Lima"]
    res = Refiner(eng).refine_batch([req(MISSING, c) for c in cities])
    assert eng.batch_sizes == [4, 1, 1, 1, 1]
    assert [r["stage"] for r in res] == ["model"] * 4
    assert [r["calls"][0]["arguments"]["city"] for r in res] == cities
    assert all("model_error" not in r for r in res)


def test_a_failing_request_keeps_tier1_repairs_with_their_actions():
    eng = PickyEngine(poison="Atlantis")
    res = Refiner(eng, bypass=False).refine_batch([req(TYPO, "Atlantis"), req(GOOD, "Paris")])
    bad, ok = res
    assert bad["stage"] == "fallback" and bad["model_error"] == "ValueError: prompt too long"
    assert bad["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}] and bad["changed"]
    assert bad["diagnostics"] == [] and "tier-1 repair kept" in bad["reason"]
    assert [a["code"] for a in bad["actions"]] == ["snap_tool"]
    assert ok["stage"] == "unchanged" and ok["refined"] == GOOD  # the model kept the calls


def test_a_single_request_never_raises_and_long_messages_are_cut():
    eng = PickyEngine(max_batch=0, error=ConnectionError("x" * 5000))
    res = Refiner(eng).refine(req(MISSING))
    assert eng.batch_sizes == [1]  # nothing to retry alone
    assert res["stage"] == "fallback" and res["refined"] == MISSING
    assert res["model_error"].startswith("ConnectionError: xxx")
    assert len(res["model_error"]) <= len("ConnectionError: ") + MAX_ERROR_CHARS + 3


class WrongCountEngine:
    """Returns one result too few for batches; correct for single conversations."""

    def __init__(self) -> None:
        self.batch_sizes: list[int] = []

    def chat(self, conversations, *, n=1, **kw):
        self.batch_sizes.append(len(conversations))
        out = [[GOOD] * n for _ in conversations]
        return out[:-1] if len(conversations) > 1 else out


def test_an_engine_returning_the_wrong_number_of_results_is_retried_per_request():
    eng = WrongCountEngine()
    res = Refiner(eng).refine_batch([req(MISSING), req(MISSING)])
    assert eng.batch_sizes == [2, 1, 1] and [r["stage"] for r in res] == ["model", "model"]


def test_request_validation_errors_still_raise_with_a_failing_engine():
    eng = PickyEngine(max_batch=0)
    with pytest.raises(RequestError, match="request 1: field 'upstream' is missing"):
        Refiner(eng).refine_batch([req(MISSING), {"tools": TOOLS, "query": "q"}])
    res = Refiner(eng).refine_batch([req(MISSING), {"tools": TOOLS, "query": "q"}], errors="result")
    assert [r["stage"] for r in res] == ["fallback", "error"]
    assert "model_error" in res[0] and "model_error" not in res[1]


def test_http_engine_error_for_one_conversation():
    """The real OpenAI-compatible engine over an in-process transport: the server rejects one conversation with
    HTTP 400 (not retried by the engine), so the batch fails; the pipeline retries per request."""
    from refiner.engines.openai_http import OpenAIEngine

    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        text = user_text(body["messages"])
        seen.append(text)
        if "Atlantis" in text:
            return httpx.Response(400, json={"error": {"message": "This model's maximum context length is 4096"}})
        city = text.split("Weather in ", 1)[1].split(" for", 1)[0]
        answer = tc("get_weather", city=city, days=3)
        return httpx.Response(200, json={"choices": [{"index": 0, "message": {"role": "assistant",
                                                                                "content": answer}}]})

    eng = OpenAIEngine("http://refiner.test/v1", model="m", transport=httpx.MockTransport(handler), max_retries=0)
    res = Refiner(eng).refine_batch([req(MISSING, "Paris"), req(MISSING, "Atlantis"), req(MISSING, "Rome")])
    assert [r["stage"] for r in res] == ["model", "fallback", "model"]
    assert "EngineError" in res[1]["model_error"] and "maximum context length" in res[1]["reason"]
    assert res[2]["calls"][0]["arguments"] == {"city": "Rome", "days": 3}


def test_evaluation_reports_a_model_failure_as_not_refined():
    """``refine_safely`` relies on the pipeline's retry and turns a request marked ``model_error`` into an error row
    that keeps the upstream (evaluation scores it as refined and lists it under "Not refined")."""
    eng = PickyEngine(poison="Atlantis")
    requests = [req(TYPO, "Atlantis"), req(MISSING, "Rome"), {"tools": TOOLS, "query": "q"}]
    res = refine_safely(Refiner(eng, bypass=False), requests)
    assert eng.batch_sizes == [2, 1, 1]
    assert [r["stage"] for r in res] == ["error", "model", "error"]
    assert res[0]["error"] == f"{REFINER_FAILED}: ValueError: prompt too long" and res[0]["refined"] == TYPO
    assert res[2]["error"] == "field 'upstream' is missing"  # unreadable request: not a refiner failure
