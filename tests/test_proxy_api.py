"""The proxy as a drop-in for the whole OpenAI API, over real HTTP on loopback: every other route passed through, the
Responses API refined, the client's headers forwarded, client authentication, the per-request log line; with the
OpenAI SDK as the client where it applies."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
import test_proxy
from fake_upstream import BROKEN_CALLS, WEATHER_TOOLS, serve_in_thread

from refiner.proxy import create_app

openai = pytest.importorskip("openai")

SECRET = "sk-proxy-SECRET-never-log-7"
CLIENT_KEY = "tr-client-KEY-never-log-9"
upstream = test_proxy.upstream  # the fake upstream fixture (module-scoped), shared
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in WEATHER_TOOLS]  # the Responses API's tool shape
CUT = {"name": "get_time", "arguments": '{"tz": "CE', "id": "call_cut"}


@pytest.fixture(scope="module")
def proxy(upstream):
    with serve_in_thread(create_app(upstream[1] + "/v1", timeout=5.0, workers=0)) as url:
        yield url


@pytest.fixture(scope="module")
def locked(upstream):
    """A proxy that wants ``CLIENT_KEY`` and sends ``SECRET`` upstream."""
    app = create_app(upstream[1] + "/v1", api_key=SECRET, client_api_key=CLIENT_KEY, timeout=5.0, workers=0)
    with serve_in_thread(app) as url:
        yield url


def sdk(url: str, key: str = "client-key") -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=30)


# ------------------------------------------------------------------------------------------------ pass-through


def test_every_other_route_is_passed_through(proxy) -> None:
    client = sdk(proxy)
    assert client.models.retrieve("fake-model").id == "fake-model"
    with pytest.raises(openai.NotFoundError) as e:  # the upstream's 404, body as it came
        client.models.retrieve("no-such-model")
    assert e.value.body["code"] == "model_not_found"
    assert [m.id for m in client.models.list()] == ["fake-model"]
    done = client.completions.create(model="fake-model", prompt="hello there")
    assert done.choices[0].text == "completion of: hello there"
    streamed = "".join(c.choices[0].text for c in client.completions.create(model="fake-model", prompt="abc",
                                                                            stream=True))
    assert streamed == "completion of: abc"
    emb = client.embeddings.with_raw_response.create(model="fake-model", input=["a", "bcd"])
    assert [d.embedding for d in emb.parse().data] == [[1.0, 0.5], [3.0, 0.5]]
    assert emb.headers["x-fake-upstream"] == "embeddings"  # the upstream's own headers come back


def test_pass_through_keeps_the_documented_errors(upstream) -> None:
    with serve_in_thread(create_app(upstream[1] + "/v1", max_body_bytes=1000, workers=0)) as url:
        r = httpx.post(url + "/v1/embeddings", json={"model": "m", "input": "x" * 2000})
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
        assert httpx.get(url + "/v1/no/such/route").status_code == 404  # the upstream's answer
    with serve_in_thread(create_app("http://127.0.0.1:9/v1", timeout=2.0, workers=0)) as url:
        r = httpx.get(url + "/v1/models/fake-model")
        assert r.status_code == 502 and r.json()["error"]["type"] == "upstream_unreachable"


def test_client_headers_are_forwarded_hop_by_hop_ones_dropped(proxy, upstream) -> None:
    app, _ = upstream
    sent = {"OpenAI-Organization": "org-123", "OpenAI-Project": "proj-9", "traceparent":
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "User-Agent": "my-agent/1.0",
            "X-Custom": "kept", "Connection": "keep-alive, X-Hop", "X-Hop": "dropped", "Keep-Alive": "timeout=5",
            "Authorization": "Bearer client-key"}
    for send in (lambda: httpx.get(proxy + "/v1/models", headers=sent),
                 lambda: httpx.post(proxy + "/v1/chat/completions", headers=sent, json={
                     "model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}),
                 lambda: httpx.post(proxy + "/v1/responses", headers=sent, json={"model": "fake-model", "input": "hi"})):
        assert send().status_code == 200
        seen = dict(app.state.headers_seen[-1])
        for name in ("OpenAI-Organization", "OpenAI-Project", "traceparent", "User-Agent", "X-Custom"):
            assert seen[name.lower()] == sent[name]
        assert "x-hop" not in seen and "keep-alive" not in seen
        assert seen["authorization"] == "Bearer client-key"  # no key of its own: the client's is forwarded


def test_the_upstreams_headers_come_back_on_the_refined_routes(proxy) -> None:
    """Chat completions and responses, streamed and not: the upstream's own headers come back (its request id, rate
    limits), but not the ones that describe its body or connection, which the proxy writes itself."""
    sent = {"x-request-id": "req-42", "x-ratelimit-remaining-tokens": "999", "openai-processing-ms": "12",
            "x-tool-refiner": "inner", "x-tool-refiner-truncated": "0"}
    fake = {"content": "Checking.", "tool_calls": BROKEN_CALLS, "headers": sent}
    for path, payload in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                    "tools": WEATHER_TOOLS}),
                          ("/v1/responses", {"input": "x", "tools": RESPONSES_TOOLS})):
        for stream in (False, True):
            with httpx.stream("POST", proxy + path, json={"model": "fake-model", "x_fake": fake, "stream": stream,
                                                          **payload}, timeout=30) as r:
                r.read()
            assert r.status_code == 200, r.text
            for name in ("x-request-id", "x-ratelimit-remaining-tokens", "openai-processing-ms"):
                assert r.headers[name] == sent[name], (path, stream, name)
            assert r.headers["content-type"].startswith("text/event-stream" if stream else "application/json")
            assert r.headers.get("x-tool-refiner") == (None if stream else "repaired")  # the proxy's own report
            assert "x-tool-refiner-truncated" not in r.headers
            if not stream:
                assert int(r.headers["content-length"]) == len(r.content)  # the refined body's length


# ------------------------------------------------------------------------------------------------ authentication


def test_client_authentication(locked, upstream, caplog) -> None:
    app, _ = upstream
    caplog.set_level(logging.DEBUG)
    assert httpx.get(locked + "/health").status_code == 200  # stays open
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": CLIENT_KEY},
                    {"authorization": f"Basic {CLIENT_KEY}"}):
        r = httpx.post(locked + "/v1/chat/completions", json={"model": "m", "messages": []}, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        assert r.json()["error"]["type"] == "invalid_request_error"
        assert httpx.get(locked + "/v1/models", headers=headers).status_code == 401
    with pytest.raises(openai.AuthenticationError):
        sdk(locked, "wrong").models.list()
    client = sdk(locked, CLIENT_KEY)
    assert client.models.retrieve("fake-model").id == "fake-model"
    assert dict(app.state.headers_seen[-1])["authorization"] == f"Bearer {SECRET}"  # the proxy's key replaces it
    out = client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "x"}],
                                         tools=WEATHER_TOOLS, extra_body={"x_fake": {"tool_calls": BROKEN_CALLS[:1]}})
    assert out.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert app.state.auth_seen[-1] == f"Bearer {SECRET}"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert CLIENT_KEY not in logged and SECRET not in logged and "wrong" not in logged


def test_the_client_key_is_not_sent_upstream_without_an_upstream_key(upstream) -> None:
    app, url = upstream
    with serve_in_thread(create_app(url + "/v1", client_api_key=CLIENT_KEY, workers=0)) as proxy:
        assert httpx.get(proxy + "/v1/models", headers={"authorization": f"Bearer {CLIENT_KEY}"}).status_code == 200
        assert "authorization" not in dict(app.state.headers_seen[-1])


# ------------------------------------------------------------------------------------------------ Responses API


def test_responses_function_calls_are_refined(proxy, upstream) -> None:
    client = sdk(proxy)
    raw = client.responses.with_raw_response.create(
        model="fake-model", input="Weather in Paris?", tools=RESPONSES_TOOLS,
        extra_body={"x_fake": {"content": "Checking.", "tool_calls": BROKEN_CALLS}})
    out = raw.parse()
    calls = [i for i in out.output if i.type == "function_call"]
    assert [(c.name, json.loads(c.arguments), c.call_id, c.id) for c in calls] == [
        ("get_weather", {"city": "Paris", "days": 3}, "call_a", "fc_fake_0"),
        ("get_time", {"tz": "CET"}, "call_b", "fc_fake_1")]
    assert out.output[0].type == "message" and out.output_text == "Checking."
    assert raw.headers["x-tool-refiner"] == "repaired"
    assert upstream[0].state.bodies[-1]["tools"] == RESPONSES_TOOLS  # forwarded as sent


def test_a_cut_responses_call_is_reported_never_returned(proxy) -> None:
    data = httpx.post(proxy + "/v1/responses", json={
        "model": "fake-model", "input": "x", "tools": RESPONSES_TOOLS,
        "x_fake": {"tool_calls": [BROKEN_CALLS[0], CUT], "finish_reason": "length"}}, timeout=30).json()
    assert data["status"] == "incomplete" and data["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [i["call_id"] for i in data["output"]] == ["call_a"]
    assert data["tool_refiner"]["truncated"] == [{"choice": 0, "call": 1, "id": "call_cut", "name": "get_time",
                                                  "arguments": '{"tz": "CE'}]


def events_of(url: str, payload: dict) -> list[dict]:
    with httpx.stream("POST", url + "/v1/responses", json={**payload, "stream": True}, timeout=30) as r:
        text = "".join(r.iter_text())
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def test_responses_stream_emits_refined_calls(proxy) -> None:
    client = sdk(proxy)
    events = list(client.responses.create(model="fake-model", input="x", tools=RESPONSES_TOOLS, stream=True,
                                          extra_body={"x_fake": {"content": "Sure.", "tool_calls": BROKEN_CALLS}}))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = [e.item for e in events if e.type == "response.output_item.done" and e.item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in done] == [("get_weather", {"city": "Paris", "days": 3}),
                                                                  ("get_time", {"tz": "CET"})]
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert deltas == "".join(c.arguments for c in done)  # no fragment of the broken originals
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Sure."
    final = events[-1]
    assert final.type == "response.completed"
    assert [(i.name, i.call_id) for i in final.response.output if i.type == "function_call"] == [
        ("get_weather", "call_a"), ("get_time", "call_b")]
    cut = events_of(proxy, {"model": "fake-model", "input": "x", "tools": RESPONSES_TOOLS,
                            "x_fake": {"tool_calls": [BROKEN_CALLS[0], CUT], "finish_reason": "length"}})
    assert not any("call_cut" in json.dumps(e) for e in cut[:-1])  # not even the cut call's first event
    assert cut[-1]["type"] == "response.incomplete"
    assert [i["call_id"] for i in cut[-1]["response"]["output"]] == ["call_a"]
    assert cut[-1]["response"]["tool_refiner"]["truncated"][0]["id"] == "call_cut"


def test_responses_errors_keep_their_documented_answers(proxy) -> None:
    r = httpx.post(proxy + "/v1/responses", json={"model": "m", "input": "x", "x_fake": {"status": 503}})
    assert r.status_code == 502 and r.json()["error"]["type"] == "upstream_error"
    r = httpx.post(proxy + "/v1/responses", content=b"{not json")
    assert r.status_code == 400


# ------------------------------------------------------------------------------------------------ log line


def test_one_info_line_per_request_without_keys_or_bodies(proxy, caplog) -> None:
    caplog.set_level(logging.INFO, logger="refiner.proxy")
    httpx.post(proxy + "/v1/chat/completions", headers={"authorization": f"Bearer {SECRET}"}, json={
        "model": "fake-model", "messages": [{"role": "user", "content": "secret-body-text"}], "tools": WEATHER_TOOLS,
        "x_fake": {"tool_calls": BROKEN_CALLS[:1]}}, timeout=30)
    httpx.get(proxy + "/v1/models/fake-model", headers={"authorization": f"Bearer {SECRET}"})
    lines = [r.getMessage() for r in caplog.records if r.name == "refiner.proxy" and r.levelno == logging.INFO]
    chat = [x for x in lines if "/v1/chat/completions" in x]
    assert len(chat) == 1 and " 200 " in chat[0] and "stage=repaired" in chat[0] and "ms" in chat[0]
    assert len([x for x in lines if "/v1/models/fake-model" in x]) == 1
    events_of(proxy, {"model": "fake-model", "input": "x", "tools": RESPONSES_TOOLS,
                      "x_fake": {"tool_calls": BROKEN_CALLS[:1]}})
    lines = [r.getMessage() for r in caplog.records if r.name == "refiner.proxy" and r.levelno == logging.INFO]
    streamed = [x for x in lines if "/v1/responses" in x]
    assert len(streamed) == 1 and " stream " in streamed[0] and "stage=repaired" in streamed[0]
    assert not any(SECRET in x or "secret-body-text" in x or "Paris" in x for x in lines)


def test_responses_mid_stream_failure_is_an_error_event() -> None:
    """An upstream failure mid-stream ends a Responses stream with an event whose ``type`` is ``error`` (the
    failure's own type, e.g. ``upstream_timeout``, is its ``code``; it once overwrote the event's type)."""
    import asyncio

    from refiner.proxy import responses
    from refiner.proxy.upstream import UpstreamError

    async def events():
        yield {"type": "response.created", "sequence_number": 0, "response": {"id": "r"}}
        raise UpstreamError(504, "the upstream stalled", "upstream_timeout")

    async def collect() -> list[str]:
        return [text async for text in responses.relay(events(), None, {})]

    created, failed = asyncio.run(collect())
    assert failed.startswith("event: error\n")
    event = json.loads(failed.split("data: ", 1)[1])
    assert event == {"type": "error", "code": "upstream_timeout", "message": "the upstream stalled", "param": None,
                     "sequence_number": 1}
