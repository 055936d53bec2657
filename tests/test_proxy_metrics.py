"""``GET /metrics``: the real proxy app on loopback in front of the fake upstream, with a client key and a scripted
refiner model; real requests (clean, repaired, calls in content, the model's answer, the guard's fallback, a cut call,
an auth failure, a body too large, upstream errors; streamed and not), then the scrape, parsed by
``prometheus_client``'s own parser: every counter moved exactly as the requests say."""

from __future__ import annotations

import json

import httpx
import pytest
import test_proxy
from fake_upstream import BROKEN_CALLS, VALID_CALLS, WEATHER_TOOLS, create_fake_upstream, serve_in_thread
from prometheus_client.parser import text_string_to_metric_families

from refiner.pipeline import Refiner
from refiner.proxy import create_app

upstream = test_proxy.upstream  # the fake upstream fixture (module-scoped), shared
KEY = "tr-metrics-KEY-5"
ROUTE = "/v1/chat/completions"
UNKNOWN = [{"name": "book_flight", "arguments": '{"to": "Paris"}', "id": "call_q"}]  # tier 1 cannot repair it
CUT = {"name": "get_time", "arguments": '{"tz": "CE', "id": "call_cut"}
HERMES_IN_CONTENT = ('I will check.\n<tool_call>\n{"name": "get_wether", "arguments": {"city": "Paris", "days": "3"}}'
                     '\n</tool_call>')


class Scripted:
    """A refiner model: the right call for every conversation, but a useless answer when the user says "garble"."""

    def chat(self, conversations, *, n=1, temperature=0.0, max_tokens=1024, enable_thinking=None, seed=None):
        fixed = '<func_call>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]</func_call>'
        return [["no calls here" if "garble" in json.dumps(c) else fixed] * n for c in conversations]


@pytest.fixture(scope="module")
def proxy(upstream):
    app = create_app(upstream[1] + "/v1", refiner=Refiner(Scripted()), client_api_key=KEY, timeout=2.5,
                     max_body_bytes=32_000, workers=0)
    with serve_in_thread(app) as url:
        yield url


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """Every sample of ``/metrics`` (asked without a key: it is open), keyed by its name and labels."""
    r = httpx.get(url + "/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def chat(url: str, fake: dict, *, stream: bool = False, key: str | None = KEY, **kw) -> httpx.Response:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": kw.pop("say", "Weather in Paris?")}],
            "tools": WEATHER_TOOLS, "x_fake": fake, "stream": stream, **kw}
    headers = {"authorization": f"Bearer {key}"} if key else {}
    with httpx.stream("POST", url + ROUTE, json=body, headers=headers, timeout=30) as r:
        r.read()
    return r


def test_the_counters_move_as_the_requests_say(proxy) -> None:
    before = scrape(proxy)
    assert not any(name.endswith("_total") and v for (name, _), v in before.items())  # a fresh app's own registry
    stages = [chat(proxy, {"tool_calls": VALID_CALLS}).headers["x-tool-refiner"],
              chat(proxy, {"tool_calls": BROKEN_CALLS}).headers["x-tool-refiner"],
              chat(proxy, {"content": HERMES_IN_CONTENT}).headers["x-tool-refiner"],
              chat(proxy, {"tool_calls": UNKNOWN}).headers["x-tool-refiner"],
              chat(proxy, {"tool_calls": UNKNOWN}, say="garble").headers["x-tool-refiner"],
              chat(proxy, {"tool_calls": [VALID_CALLS[0], CUT], "finish_reason": "length"}).headers["x-tool-refiner"]]
    assert stages == ["unchanged", "repaired", "repaired", "model", "fallback", "truncated"]
    for calls in (VALID_CALLS, BROKEN_CALLS):
        r = chat(proxy, {"tool_calls": calls}, stream=True)
        assert r.status_code == 200 and '"tool_calls"' in r.text
    assert chat(proxy, {"tool_calls": VALID_CALLS}, key=None).status_code == 401
    assert chat(proxy, {"tool_calls": VALID_CALLS}, key="wrong").status_code == 401
    assert httpx.get(proxy + "/v1/models").status_code == 401
    assert chat(proxy, {"content": "x" * 40_000}).status_code == 413
    assert chat(proxy, {"status": 500}).status_code == 502
    assert chat(proxy, {"status": 503}, stream=True).status_code == 502
    stalled = chat(proxy, {"content": "partial", "stream_stall": 8}, stream=True)  # times out mid-stream
    assert stalled.status_code == 200 and "upstream_timeout" in stalled.text
    assert httpx.get(proxy + "/health").status_code == 200  # open, and not counted

    m = scrape(proxy)
    requests = {labels: v for (name, labels), v in m.items() if name == "tool_refiner_requests_total"}
    assert requests == {(("route", ROUTE), ("status", "200")): 8.0, (("route", ROUTE), ("status", "401")): 2.0,
                        (("route", "/v1/{path}"), ("status", "401")): 1.0, (("route", ROUTE), ("status", "413")): 1.0,
                        (("route", ROUTE), ("status", "502")): 3.0}
    assert value(m, "tool_refiner_refused_total", reason="auth") == 3
    assert value(m, "tool_refiner_refused_total", reason="size") == 1
    assert value(m, "tool_refiner_upstream_errors_total", kind="upstream_error") == 2  # 500, and 503 before a stream
    assert value(m, "tool_refiner_upstream_errors_total", kind="upstream_timeout") == 1  # the stalled stream
    choices = {dict(labels)["stage"]: v for (name, labels), v in m.items() if name == "tool_refiner_choices_total"}
    assert choices == {"unchanged": 2, "repaired": 3, "model": 1, "fallback": 1, "truncated": 1}
    # calls returned: 2 clean + 2 repaired + 1 cut answer's complete one + 1 model + 1 fallback (the upstream's),
    # and the streamed 2 + 2; the one in the content
    assert value(m, "tool_refiner_calls_read_total", source="tool_calls") == 11
    assert value(m, "tool_refiner_calls_read_total", source="content") == 1
    repairs = {tuple(dict(labels)[k] for k in ("class", "stage")): v for (name, labels), v in m.items()
               if name == "tool_refiner_repairs_total"}
    # BROKEN_CALLS, whole and streamed: a misspelt tool, Python quotes and a missing brace, "3" for an integer; the
    # content's call: the misspelt tool and "3"; the model and the fallback: the unknown tool the gate found
    assert repairs == {("snap_tool", "repaired"): 3, ("parse_repair", "repaired"): 2, ("coerce", "repaired"): 3,
                       ("unknown_tool", "model"): 1, ("unknown_tool", "fallback"): 1}
    model = {dict(labels)["outcome"]: v for (name, labels), v in m.items() if name == "tool_refiner_model_calls_total"}
    assert model == {"model": 1, "fallback": 1}
    for hist in ("tool_refiner_added_seconds", "tool_refiner_upstream_seconds"):
        for mode, n in (("whole", 6), ("stream", 2)):  # the answered requests on the refined route
            assert value(m, hist + "_count", route=ROUTE, mode=mode) == n, (hist, mode)
            assert value(m, hist + "_bucket", route=ROUTE, mode=mode, le="+Inf") == n
            assert value(m, hist + "_sum", route=ROUTE, mode=mode) > 0
    assert value(m, "tool_refiner_upstream_seconds_bucket", route=ROUTE, mode="whole", le="0.01") <= 6


def test_each_app_counts_apart_and_metrics_are_open(upstream) -> None:
    """Two apps in one process: each has its own registry (no duplicate-series error, no shared counts); with a
    client key set, /metrics still answers without one, as /health does."""
    with serve_in_thread(create_app(upstream[1] + "/v1", workers=0)) as a, \
            serve_in_thread(create_app(upstream[1] + "/v1", workers=0, client_api_key=KEY)) as b:
        assert chat(a, {"tool_calls": VALID_CALLS}, key=None).status_code == 200
        assert value(scrape(a), "tool_refiner_requests_total", route=ROUTE, status="200") == 1
        assert value(scrape(b), "tool_refiner_requests_total", route=ROUTE, status="200") == 0


def test_passed_through_routes_are_counted_under_one_label() -> None:
    with serve_in_thread(create_fake_upstream()) as up, serve_in_thread(create_app(up + "/v1", workers=0)) as url:
        for path in ("/v1/models", "/v1/models/fake-model", "/v1/models/no-such-model"):
            httpx.get(url + path)
        m = scrape(url)
    assert value(m, "tool_refiner_requests_total", route="/v1/{path}", status="200") == 2
    assert value(m, "tool_refiner_requests_total", route="/v1/{path}", status="404") == 1
    assert value(m, "tool_refiner_upstream_seconds_count", route="/v1/{path}", mode="whole") == 0
