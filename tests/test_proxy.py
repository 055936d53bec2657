"""The refining proxy over real HTTP on loopback: fake upstream (uvicorn thread) ← proxy (uvicorn thread) ← client."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from fake_upstream import (
    BROKEN_CALLS,
    WEATHER_QUERY,
    WEATHER_TOOLS,
    create_fake_upstream,
    free_port,
    serve_in_subprocess,
    serve_in_thread,
)

from refiner.engines import make_engine
from refiner.pipeline import Refiner
from refiner.proxy import apply_result, create_app, rebuild_tool_calls

TOOLS = WEATHER_TOOLS
MESSAGES = [{"role": "user", "content": WEATHER_QUERY}]
SECRET = "sk-proxy-SECRET-never-log-7"


def tc(name: str, arguments: str, id: str) -> dict:
    return {"name": name, "arguments": arguments, "id": id}


BROKEN = [{**BROKEN_CALLS[0]}, tc("get_time", '{"tz": "CET"}', "call_b")]


def body(fake: dict, **kw) -> dict:
    return {"model": "fake-model", "messages": MESSAGES, "tools": TOOLS, "x_fake": fake, **kw}


class DropAll:
    """Stand-in refiner whose answer removes every call."""

    def refine_batch(self, requests: list[dict]) -> list[dict]:
        return [{"calls": [], "changed": True, "stage": "model"} for _ in requests]


class Boom:
    def refine_batch(self, requests: list[dict]) -> list[dict]:
        raise RuntimeError("refiner exploded")


@pytest.fixture(scope="module")
def upstream():
    app = create_fake_upstream()
    with serve_in_thread(app) as url:
        yield app, url


@pytest.fixture(scope="module")
def proxy(upstream):
    with serve_in_thread(create_app(upstream[1] + "/v1", timeout=1.0)) as url:
        yield url


def post(url: str, payload: dict, **kw) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", json=payload, timeout=30, **kw)


def args_of(choice: dict) -> list[tuple[str, dict, str]]:
    return [(t["function"]["name"], json.loads(t["function"]["arguments"]), t["id"])
            for t in choice["message"]["tool_calls"]]


# ------------------------------------------------------------------------------------------------ non-streaming


def test_broken_calls_are_repaired_and_ids_order_content_usage_kept(proxy) -> None:
    r = post(proxy, body({"content": "Let me check.", "tool_calls": BROKEN}))
    assert r.status_code == 200, r.text
    data = r.json()
    choice = data["choices"][0]
    assert args_of(choice) == [("get_weather", {"city": "Paris", "days": 3}, "call_a"),
                               ("get_time", {"tz": "CET"}, "call_b")]
    assert all(isinstance(t["function"]["arguments"], str) for t in choice["message"]["tool_calls"])
    assert choice["message"]["content"] == "Let me check."
    assert choice["finish_reason"] == "tool_calls"
    assert data["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    assert data["id"] == "chatcmpl-fake" and r.headers["x-tool-refiner"] == "repaired"


def test_valid_calls_come_back_byte_for_byte(proxy) -> None:
    calls = [tc("get_weather", '{"city":"Paris",   "days": 3}', "call_x")]
    r = post(proxy, body({"tool_calls": calls}))
    t = r.json()["choices"][0]["message"]["tool_calls"][0]
    assert t == {"id": "call_x", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Paris",   "days": 3}'}}
    assert r.headers["x-tool-refiner"] == "unchanged"


def test_arguments_sent_as_objects_come_back_as_json_strings(proxy) -> None:
    raw = [{"id": "call_o", "type": "function", "function": {"name": "get_time", "arguments": {"tz": "CET"}}}]
    r = post(proxy, body({"raw_tool_calls": raw, "content": None}))
    message = r.json()["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["arguments"] == '{"tz": "CET"}'
    assert message["tool_calls"][0]["id"] == "call_o" and message["content"] is None


def test_plain_answers_pass_through(proxy) -> None:
    r = post(proxy, body({"content": "Hello!"}, n=2))
    data = r.json()
    assert [c["message"]["content"] for c in data["choices"]] == ["Hello!", "Hello!"]
    assert all("tool_calls" not in c["message"] and c["finish_reason"] == "stop" for c in data["choices"])
    assert r.headers["x-tool-refiner"] == "none,none"


def test_every_choice_is_refined(proxy) -> None:
    r = post(proxy, body({"tool_calls": BROKEN[:1]}, n=3))
    choices = r.json()["choices"]
    assert [args_of(c) for c in choices] == [[("get_weather", {"city": "Paris", "days": 3}, "call_a")]] * 3


def test_no_call_left_downgrades_finish_reason(upstream) -> None:
    with serve_in_thread(create_app(upstream[1] + "/v1", refiner=DropAll())) as url:
        r = post(url, body({"content": "text", "tool_calls": BROKEN}))
    choice = r.json()["choices"][0]
    assert "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop" and choice["message"]["content"] == "text"


def test_a_failing_refiner_returns_the_upstream_answer(upstream, caplog) -> None:
    with serve_in_thread(create_app(upstream[1] + "/v1", refiner=Boom())) as url:
        r = post(url, body({"tool_calls": BROKEN}))
    assert r.status_code == 200 and r.headers["x-tool-refiner"] == "error"
    assert r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == BROKEN[0]["arguments"]
    assert "refiner exploded" in caplog.text


def test_model_backed_refiner_over_http(upstream) -> None:
    """The refiner model behind an OpenAI-compatible server (here: the fake, scripted with the corrected answer). The
    model was not trained on OpenAI's message JSON: it is shown the calls in a trained format (xlam) and answers in
    it; the proxy writes the answer back as tool_calls."""
    fixed = [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]
    answer = ("<think>book_flight is not a tool; the user wants the weather.</think>\n"
              f"<func_call>{json.dumps(fixed)}</func_call>")
    eng = make_engine("openai", base_url=upstream[1] + "/v1", model="refiner",
                      extra_body={"x_fake": {"content": answer}})
    with serve_in_thread(create_app(upstream[1] + "/v1", refiner=Refiner(eng))) as url:
        r = post(url, body({"tool_calls": [tc("book_flight", '{"to": "Paris"}', "call_q")]}))
    assert r.headers["x-tool-refiner"] == "model"
    assert args_of(r.json()["choices"][0]) == [("get_weather", {"city": "Paris", "days": 3}, "call_q")]


HERMES_IN_CONTENT = ('I will check.\n<tool_call>\n{"name": "get_wether", "arguments": {"city": "Paris", "days": "3"}}'
                     '\n</tool_call>')


def test_calls_left_in_content_are_moved_to_tool_calls_by_default(upstream, proxy) -> None:
    """An upstream whose tool parser failed returns the raw Hermes calls as content (vLLM does this)."""
    r = post(proxy, body({"content": HERMES_IN_CONTENT}))
    choice = r.json()["choices"][0]
    assert choice["message"]["content"] == "I will check." and choice["finish_reason"] == "tool_calls"
    assert [(t["function"]["name"], json.loads(t["function"]["arguments"])) for t in choice["message"]["tool_calls"]
            ] == [("get_weather", {"city": "Paris", "days": 3})]
    assert r.headers["x-tool-refiner-content-calls"] == "0:hermes"
    assert r.json()["tool_refiner"]["content_calls"] == [{"choice": 0, "format": "hermes"}]
    prose = post(proxy, body({"content": "Sure (happy to help): it is sunny."}))
    assert prose.json()["choices"][0]["message"] == {"role": "assistant", "content": "Sure (happy to help): it is sunny."}
    assert prose.json()["choices"][0]["finish_reason"] == "stop" and "tool_refiner" not in prose.json()
    # no tools offered, tool_choice "none", or a JSON answer asked for: the content is an answer, never calls
    for extra in ({"tools": None}, {"tool_choice": "none"}, {"response_format": {"type": "json_object"}}):
        message = post(proxy, {**body({"content": HERMES_IN_CONTENT}), **extra}).json()["choices"][0]["message"]
        assert message == {"role": "assistant", "content": HERMES_IN_CONTENT}, extra
    with serve_in_thread(create_app(upstream[1] + "/v1", content_calls="off")) as url:
        assert post(url, body({"content": HERMES_IN_CONTENT})).json()["choices"][0]["message"] == {
            "role": "assistant", "content": HERMES_IN_CONTENT}
    with serve_in_thread(create_app(upstream[1] + "/v1", content_calls=("xlam",))) as url:  # hermes not allowed
        assert post(url, body({"content": HERMES_IN_CONTENT})).json()["choices"][0]["message"] == {
            "role": "assistant", "content": HERMES_IN_CONTENT}
    with pytest.raises(KeyError, match="unknown wire format"):
        create_app("http://127.0.0.1:9/v1", content_calls=("nope",))


def test_rebuild_tool_calls_keeps_ids_by_position_name_then_order() -> None:
    original = [{"id": "a", "function": {"name": "f"}}, {"id": "b", "function": {"name": "g"}},
                {"id": "c", "function": {"name": "h"}}]
    calls = [{"name": "g", "arguments": {}}, {"name": "x", "arguments": {"k": 1}}, {"name": "h", "arguments": {}},
             {"name": "y", "arguments": {}}]
    out = rebuild_tool_calls(original, calls)
    assert [t["id"] for t in out[:3]] == ["b", "a", "c"]
    assert out[3]["id"].startswith("call_") and out[3]["id"] not in "abc"
    assert out[1]["function"] == {"name": "x", "arguments": '{"k": 1}'}
    msg, reason = apply_result({"content": None, "tool_calls": original}, "stop", {"calls": calls, "changed": True,
                                                                                  "stage": "repaired"})
    assert reason == "tool_calls" and len(msg["tool_calls"]) == 4
    # thousands of renamed calls (a hostile answer's shape) keep their ids in order
    many = [{"id": f"c{i}", "function": {"name": "get_wether"}} for i in range(5000)]
    out = rebuild_tool_calls(many, [{"name": "get_weather", "arguments": {}}] * 5000)
    assert [t["id"] for t in out] == [f"c{i}" for i in range(5000)]


# ------------------------------------------------------------------------------------------------ truncation

CUT = tc("get_time", '{"tz": "CE', "call_cut")  # the upstream hit its token limit inside this call


CUT_REPORT = {"choice": 0, "call": 1, "id": "call_cut", "name": "get_time", "arguments": '{"tz": "CE'}


def test_a_call_cut_by_the_token_limit_is_reported_never_returned_as_a_call(proxy) -> None:
    r = post(proxy, body({"tool_calls": [BROKEN[0], CUT], "finish_reason": "length"}))
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert args_of(choice) == [("get_weather", {"city": "Paris", "days": 3}, "call_a")]  # the cut call is not there
    assert r.headers["x-tool-refiner-truncated"] == "0" and r.headers["x-tool-refiner"] == "truncated"
    assert r.json()["tool_refiner"]["truncated"] == [CUT_REPORT]
    only = post(proxy, body({"tool_calls": [CUT], "finish_reason": "length"}))
    assert "tool_calls" not in only.json()["choices"][0]["message"]
    assert only.json()["tool_refiner"]["truncated"] == [{**CUT_REPORT, "call": 0}]
    assert only.headers["x-tool-refiner"] == "truncated" and only.json()["choices"][0]["finish_reason"] == "length"
    clean = post(proxy, body({"tool_calls": [tc("get_weather", '{"city": "Paris"}', "call_w"), CUT],
                              "finish_reason": "length"}))  # the complete call needs no repair: still not "unchanged"
    assert clean.headers["x-tool-refiner"] == "truncated" and clean.headers["x-tool-refiner-truncated"] == "0"
    assert args_of(clean.json()["choices"][0]) == [("get_weather", {"city": "Paris"}, "call_w")]


def test_a_complete_last_call_under_length_is_refined_and_length_kept(proxy) -> None:
    r = post(proxy, body({"tool_calls": BROKEN[:1] + [tc("get_time", '{"tz": "CET"}', "call_t")],
                          "finish_reason": "length"}))
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "length" and "x-tool-refiner-truncated" not in r.headers
    assert [n for n, _, _ in args_of(choice)] == ["get_weather", "get_time"]


def test_a_cut_call_in_a_stream_is_reported_never_streamed_as_a_call(proxy) -> None:
    for calls in ([BROKEN[0], CUT], [CUT]):
        _, events = stream(proxy, body({"tool_calls": calls, "finish_reason": "length"}))
        chunks = [c for c in events[:-1] if c["choices"]]
        deltas = [t for c in chunks for t in c["choices"][0]["delta"].get("tool_calls", [])]
        streamed = [{**t, "function": {**t["function"], "arguments": "".join(
            d["function"].get("arguments", "") for d in deltas if d["index"] == t["index"])}} for t in deltas if "id" in t]
        assert [t["id"] for t in streamed] == ["call_a"][: len(calls) - 1]  # no delta of the cut call, not even its id
        assert {d["index"] for d in deltas} == set(range(len(calls) - 1))
        assert all(json.loads(t["function"]["arguments"]) == {"city": "Paris", "days": 3} for t in streamed)
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        assert chunks[-1]["tool_refiner"]["truncated"] == [{**CUT_REPORT, "call": len(calls) - 1}]
        assert chunks[-1]["tool_refiner"]["stages"] == ["truncated"]


# ------------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "fake, status, kind",
    [
        ({"delay": 3}, 504, "upstream_timeout"),
        ({"malformed": True}, 502, "upstream_malformed"),
        ({"status": 500}, 502, "upstream_error"),
        ({"status": 503}, 502, "upstream_error"),
        ({"status": 400}, 400, "upstream_client_error"),
        ({"status": 429}, 429, "upstream_client_error"),
    ],
)
def test_upstream_failures_map_to_openai_errors(proxy, fake, status, kind) -> None:
    r = post(proxy, body(fake))
    assert r.status_code == status
    err = r.json()["error"]
    assert err["type"] == kind and err["code"] == status and err["message"]
    assert r.headers.get("retry-after") == ("7" if status == 429 else None)


def test_unreachable_upstream_is_502() -> None:
    with serve_in_thread(create_app("http://127.0.0.1:9/v1")) as url:
        r = post(url, body({}))
        assert r.status_code == 502 and r.json()["error"]["type"] == "upstream_unreachable"
        assert httpx.get(url + "/v1/models").status_code == 502


def test_bad_client_json_is_400(proxy) -> None:
    r = httpx.post(proxy + "/v1/chat/completions", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert httpx.post(proxy + "/v1/chat/completions", json=[1, 2]).status_code == 400


def test_models_passthrough_and_health(proxy, upstream) -> None:
    assert httpx.get(proxy + "/v1/models").json()["data"][0]["id"] == "fake-model"
    health = httpx.get(proxy + "/health").json()
    assert health["status"] == "ok" and health["upstream"] == upstream[1] + "/v1" and health["model"] is False


# ------------------------------------------------------------------------------------------------ streaming


def stream(url: str, payload: dict) -> tuple[int, list]:
    events = []
    with httpx.stream("POST", url + "/v1/chat/completions", json={**payload, "stream": True}, timeout=30) as r:
        if r.status_code != 200:
            r.read()
            return r.status_code, [r.json()]
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:] if line[6:] == "[DONE]" else json.loads(line[6:]))
    return 200, events


def test_stream_forwards_content_and_reemits_refined_tool_calls(proxy) -> None:
    # the hint says the prompt opened no reasoning block (else content is held until that is known, or learned)
    status, events = stream(proxy, body({"content": "Checking the forecast now.", "tool_calls": BROKEN},
                                        chat_template_kwargs={"enable_thinking": False}))
    assert status == 200 and events[-1] == "[DONE]"
    chunks = events[:-1]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    text = "".join(d.get("content") or "" for d in deltas)
    assert text == "Checking the forecast now."
    assert sum(1 for d in deltas if "content" in d) >= 5  # forwarded piece by piece, not buffered
    calls = [t for d in deltas for t in d.get("tool_calls", [])]
    heads = [t for t in calls if "id" in t]  # OpenAI's incremental deltas: index, id and name once, then arguments
    assert [(t["index"], t["id"], t["function"]["name"], t["function"]["arguments"]) for t in heads] == [
        (0, "call_a", "get_weather", ""), (1, "call_b", "get_time", "")]
    args = {k: "".join(t["function"]["arguments"] for t in calls if t["index"] == k) for k in (0, 1)}
    assert [json.loads(args[0]), json.loads(args[1])] == [{"city": "Paris", "days": 3}, {"tz": "CET"}]
    assert all(set(t) == {"index", "function"} and set(t["function"]) == {"arguments"} for t in calls if "id" not in t)
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "tool_calls" and all(f is None for f in finishes[:-1])
    assert all(c["id"] == "chatcmpl-fake-stream" for c in chunks)


def test_stream_without_tool_calls(proxy) -> None:
    _, events = stream(proxy, body({"content": "Just text."}))
    deltas = [c["choices"][0] for c in events[:-1]]
    assert "".join(d["delta"].get("content") or "" for d in deltas) == "Just text."
    assert deltas[-1]["finish_reason"] == "stop" and events[-1] == "[DONE]"


def test_stream_reemits_usage_last(proxy) -> None:
    _, events = stream(proxy, body({"tool_calls": BROKEN[:1]}, stream_options={"include_usage": True}))
    assert events[-1] == "[DONE]" and events[-2]["choices"] == []
    assert events[-2]["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    assert events[-3]["choices"][0]["finish_reason"] == "tool_calls"


def test_stream_stalling_mid_way_ends_with_an_error_event(proxy) -> None:
    status, events = stream(proxy, body({"content": "partial", "stream_stall": 3}))
    assert status == 200 and events[-1] == "[DONE]"
    assert events[-2]["error"]["type"] == "upstream_timeout"
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in events[:-2]) == "partial"


def test_stream_with_a_failing_refiner_reemits_the_upstream_calls(upstream) -> None:
    with serve_in_thread(create_app(upstream[1] + "/v1", refiner=Boom())) as url:
        _, events = stream(url, body({"tool_calls": BROKEN}))
    calls = [t for c in events[:-1] for t in c["choices"][0]["delta"].get("tool_calls", [])]
    ids = [t["id"] for t in calls if "id" in t]
    args = ["".join(t["function"]["arguments"] for t in calls if t["index"] == k) for k in range(len(ids))]
    assert list(zip(ids, args)) == [(c["id"], c["arguments"]) for c in BROKEN]


class SlowSerialRefiner:
    """Stand-in that fails if called from two threads at once, and records its batch sizes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sizes: list[int] = []

    def refine_batch(self, requests: list[dict]) -> list[dict]:
        assert self.lock.acquire(blocking=False), "refiner called concurrently"
        try:
            time.sleep(0.05)
            self.sizes.append(len(requests))
            return [{"changed": False, "stage": "unchanged"} for _ in requests]
        finally:
            self.lock.release()


def test_refiner_calls_are_serialised_and_batched(upstream) -> None:
    ref = SlowSerialRefiner()

    async def run(url: str) -> list[int]:
        async with httpx.AsyncClient(timeout=60) as client:
            rs = await asyncio.gather(*(client.post(url + "/v1/chat/completions", json=body({"tool_calls": BROKEN}))
                                        for _ in range(40)))
        return [r.status_code for r in rs]

    with serve_in_thread(create_app(upstream[1] + "/v1", refiner=ref, max_batch=16)) as url:
        assert asyncio.run(run(url)) == [200] * 40
    assert sum(ref.sizes) == 40 and max(ref.sizes) <= 16 and len(ref.sizes) < 40


def test_stream_upstream_errors(proxy) -> None:
    assert stream(proxy, body({"status": 500}))[0] == 502
    status, events = stream(proxy, body({"delay": 3}))
    assert status == 504 and events[0]["error"]["type"] == "upstream_timeout"


# ------------------------------------------------------------------------------------------------ keys, load


def test_api_keys_are_forwarded_and_never_logged(upstream, caplog) -> None:
    app, up = upstream
    caplog.set_level(logging.DEBUG)
    with serve_in_thread(create_app(up + "/v1", api_key=SECRET), log_level="debug") as url:
        post(url, body({"tool_calls": BROKEN}), headers={"authorization": "Bearer client-key"})
        assert app.state.auth_seen[-1] == f"Bearer {SECRET}"  # the proxy's own key replaces the client's
        post(url, body({"status": 500}))
    with serve_in_thread(create_app(up + "/v1"), log_level="debug") as url:
        post(url, body({"delay": 0}), headers={"authorization": f"Bearer {SECRET}"})
        assert app.state.auth_seen[-1] == f"Bearer {SECRET}"  # no key configured: the client's is forwarded
    assert caplog.records and SECRET not in caplog.text


def test_cli_proxy_serves_500_concurrent_requests_without_error() -> None:
    """``tool-refiner serve`` started for real (own process) in front of the fake upstream (own process)."""
    py = sys.executable
    up_port, px_port = free_port(), free_port()
    with serve_in_subprocess([py, str(Path(__file__).with_name("fake_upstream.py")), str(up_port)], up_port) as up:
        # a capacity test: the deadline is set out of reach, so a busy machine cannot turn refinements into timeouts
        cli = [py, "-m", "refiner.cli", "serve", "--upstream-base-url", up + "/v1", "--port", str(px_port),
               "--log-level", "warning", "--refine-timeout", "300", "--max-body-mb", "2", "--content-calls", "off"]
        with serve_in_subprocess(cli, px_port, health_path="/health") as proxy:
            health = httpx.get(proxy + "/health").json()
            assert (health["max_body_bytes"], health["refine_timeout"], health["content_calls"]) == (2 * 1024 * 1024,
                                                                                                    300, "off")

            async def run() -> list[httpx.Response]:
                async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=500)) as client:
                    payloads = [body({"tool_calls": BROKEN if i % 2 else BROKEN[1:], "content": f"r{i}"})
                                for i in range(500)]
                    return await asyncio.gather(*(client.post(proxy + "/v1/chat/completions", json=p)
                                                  for p in payloads))

            responses = asyncio.run(run())
    assert [r.status_code for r in responses] == [200] * 500
    assert {r.headers["x-tool-refiner"] for r in responses} == {"repaired", "unchanged"}
    for i, r in enumerate(responses):
        choice = r.json()["choices"][0]
        assert choice["message"]["content"] == f"r{i}"
        names = [t["function"]["name"] for t in choice["message"]["tool_calls"]]
        assert names == (["get_weather", "get_time"] if i % 2 else ["get_time"])
        assert all(isinstance(json.loads(t["function"]["arguments"]), dict) for t in choice["message"]["tool_calls"])
