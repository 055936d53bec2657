"""The incoming conversation is healed before it is forwarded: broken tool-call arguments and misspelled tool names in
earlier assistant messages are repaired by tier 1, reported, and can be turned off."""

from __future__ import annotations

import json

import httpx
import pytest
from fake_upstream import VALID_CALLS, WEATHER_QUERY, WEATHER_TOOLS, create_fake_upstream, serve_in_thread

from refiner.proxy import create_app
from refiner.proxy.history import HistoryReport, apply_repairs, argument_problem, find_broken


def call(id: str, name: str, arguments) -> dict:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def conversation(*tool_calls: dict, tool_name: str | None = None) -> list[dict]:
    tool_msgs = [{"role": "tool", "tool_call_id": tc["id"], "content": "ok",
                  **({"name": tool_name} if tool_name else {})} for tc in tool_calls]
    return [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": WEATHER_QUERY},
            {"role": "assistant", "content": "Checking.", "tool_calls": list(tool_calls)}, *tool_msgs,
            {"role": "user", "content": "And tomorrow?"}]


@pytest.fixture(scope="module")
def upstream():
    app = create_fake_upstream()
    with serve_in_thread(app) as url:
        yield app, url


@pytest.fixture(scope="module")
def proxy(upstream):
    with serve_in_thread(create_app(upstream[1] + "/v1")) as url:
        yield url


def post(url: str, messages: list[dict], **kw) -> httpx.Response:
    payload = {"model": "m", "messages": messages, "tools": WEATHER_TOOLS, "x_fake": {"tool_calls": VALID_CALLS}, **kw}
    return httpx.post(url + "/v1/chat/completions", json=payload, timeout=60)


def forwarded(upstream) -> list[dict]:
    return upstream[0].state.bodies[-1]["messages"]


def test_broken_arguments_and_names_are_repaired_before_forwarding(upstream, proxy) -> None:
    messages = conversation(call("call_1", "get_weather", "{'city': 'Paris', 'days': 3,}"),
                            call("call_2", "get_tiem", '{"tz": "CET"}'),
                            call("call_3", "get_weather", '{"city": "Lyon"}'), tool_name="get_tiem")
    r = post(proxy, messages)
    assert r.status_code == 200 and r.headers["x-tool-refiner-history"] == "fixed=2"
    sent = forwarded(upstream)
    calls = sent[2]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_1", "call_2", "call_3"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris", "days": 3}
    assert calls[1]["function"] == {"name": "get_time", "arguments": '{"tz": "CET"}'}  # only the name changed
    assert calls[2] == messages[2]["tool_calls"][2]  # a valid call is forwarded byte for byte
    assert sent[4]["name"] == "get_time"  # the tool answer to the renamed call follows the new name
    assert [m for i, m in enumerate(sent) if i not in (2, 4)] == [m for i, m in enumerate(messages) if i not in (2, 4)]
    report = r.json()["tool_refiner"]["history"]
    assert [(e["message"], e["call"], e["id"], e["fixed"]) for e in report] == [
        (2, 0, "call_1", ["arguments"]), (2, 1, "call_2", ["name"])]
    assert report[1]["name"] == {"from": "get_tiem", "to": "get_time"}
    assert "not valid JSON" in report[0]["problems"][0]
    # the completion itself is refined as usual, and OpenAI clients see the same shape plus one extra field
    assert r.json()["choices"][0]["message"]["tool_calls"][0]["id"] == "call_a"


def test_a_clean_history_is_forwarded_as_sent(upstream, proxy) -> None:
    messages = conversation(call("call_1", "get_weather", '{"city": "Paris"}'))
    r = post(proxy, messages)
    assert "x-tool-refiner-history" not in r.headers and "tool_refiner" not in r.json()
    assert forwarded(upstream) == messages


def test_what_cannot_be_repaired_is_left_and_reported(upstream, proxy) -> None:
    messages = conversation(call("call_1", "book_flight", '{"to": "Paris"}'))
    r = post(proxy, messages)
    assert r.headers["x-tool-refiner-history"] == "fixed=0 left=1"
    assert forwarded(upstream) == messages
    entry = r.json()["tool_refiner"]["history"][0]
    assert entry["fixed"] == [] and entry["problems"] == ["unknown tool name 'book_flight'"]


def test_healing_can_be_turned_off(upstream) -> None:
    messages = conversation(call("call_1", "get_weather", "{'city': 'Paris',}"))
    with serve_in_thread(create_app(upstream[1] + "/v1", heal_history=False)) as url:
        r = post(url, messages)
    assert "x-tool-refiner-history" not in r.headers and forwarded(upstream) == messages


def test_healing_is_reported_on_streams_too(upstream, proxy) -> None:
    messages = conversation(call("call_1", "get_weather", '{"city": "Paris"'))
    with httpx.stream("POST", proxy + "/v1/chat/completions", timeout=60, json={
            "model": "m", "messages": messages, "tools": WEATHER_TOOLS, "stream": True,
            "x_fake": {"tool_calls": VALID_CALLS}}) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
        assert r.headers["x-tool-refiner-history"] == "fixed=1"
    last = json.loads(lines[-2][6:])
    assert last["tool_refiner"]["history"][0]["fixed"] == ["arguments"]
    assert json.loads(forwarded(upstream)[2]["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}


def test_a_hostile_history_is_bounded_and_forwarded_as_sent(upstream) -> None:
    storm = '{"a": 1, "b"' + "(" * 300_000
    messages = conversation(*[call(f"call_{i}", "get_weather", storm) for i in range(4)])
    with serve_in_thread(create_app(upstream[1] + "/v1", refine_timeout=0.3)) as url:
        r = post(url, messages)
    assert r.status_code == 200 and r.headers["x-tool-refiner-history"] == "timeout"
    assert forwarded(upstream) == messages


def test_find_broken_reads_every_shape() -> None:
    body = {"tools": WEATHER_TOOLS, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [
            call("a", "get_weather", {"city": "Paris"}),  # already an object: left alone
            call("b", "get_weather", ""),  # empty: not JSON
            call("c", "get_weather", "[1, 2]"),  # JSON, not an object
            call("d", "get_weather", None),  # missing
            call("e", "get_weather", '{"a":' * 5000 + "1" + "}" * 5000),  # too deep for the JSON reader
            "not a call", {"id": "f"},  # shapes that are not calls at all are not touched
        ]},
        {"role": "tool", "tool_calls": [call("g", "x", "{")]},  # only assistant messages carry calls
        "not a message",
    ]}
    found = find_broken(body)
    assert [(b.message, b.call) for b in found] == [(1, 1), (1, 2), (1, 3), (1, 4)]
    assert [argument_problem(x) for x in ('{"a": 1}', {"a": 1})] == [None, None]
    no_tools = {**body, "tools": None, "messages": [{"role": "assistant", "tool_calls": [call("z", "any", "{}")]}]}
    assert find_broken(no_tools) == []  # without tools, names cannot be judged


def test_apply_repairs_never_changes_the_callers_body() -> None:
    messages = conversation(call("call_1", "get_wether", "{'city': 'Paris'}"))
    body = {"tools": WEATHER_TOOLS, "messages": messages}
    snapshot = json.dumps(body)
    broken = find_broken(body)
    outcome = {"format": "openai", "result": {"stage": "repaired", "calls": [
        {"name": "get_weather", "arguments": {"city": "Paris"}}]}}
    out, report = apply_repairs(body, broken, [outcome])
    assert json.dumps(body) == snapshot and out["messages"][2]["tool_calls"][0]["function"] == {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert report.header() == "fixed=1" and HistoryReport().header() is None
    _, report = apply_repairs(body, broken, [{"format": "openai", "result": {"stage": "error", "calls": []}}])
    assert report.header() == "fixed=0 left=1"
