"""The OpenAI-compatible HTTP engine against a real server on loopback (the scripted fake upstream)."""

from __future__ import annotations

import logging

import pytest
from fake_upstream import MODEL_ID, create_fake_upstream, serve_in_thread

from refiner.engines import EngineError, make_engine

CONV = [{"role": "user", "content": "ping"}]
SECRET = "sk-test-SECRET-do-not-log-42"


@pytest.fixture(scope="module")
def upstream():
    app = create_fake_upstream()
    with serve_in_thread(app) as url:
        yield app, url + "/v1"


def engine(url: str, fake: dict | None = None, **kw):
    kw.setdefault("backoff", 0.01)
    return make_engine("openai", base_url=url, extra_body={"x_fake": fake or {}}, **kw)


def test_generates_n_texts_per_conversation_in_order(upstream) -> None:
    app, url = upstream
    convs = [[{"role": "user", "content": f"q{i}"}] for i in range(20)]
    out = engine(url, concurrency=4).chat(convs, n=2, max_tokens=5)
    assert out == [[f"echo: q{i} #0", f"echo: q{i} #1"] for i in range(20)]


def test_model_defaults_to_the_first_listed_and_params_are_sent(upstream) -> None:
    app, url = upstream
    eng = engine(url)
    eng.chat([CONV], temperature=0.3, max_tokens=7, seed=9, enable_thinking=False)
    body = app.state.bodies[-1]
    assert eng.model == MODEL_ID and body["model"] == MODEL_ID
    assert (body["temperature"], body["max_tokens"], body["seed"], body["n"]) == (0.3, 7, 9, 1)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    eng.chat([CONV])
    assert "chat_template_kwargs" not in app.state.bodies[-1] and "seed" not in app.state.bodies[-1]


def test_separate_reasoning_is_put_back_in_think_tags(upstream) -> None:
    _, url = upstream
    out = engine(url, {"content": "<tool_call>{}</tool_call>", "reasoning": "I should call it."}).chat([CONV])
    assert out == [["<think>\nI should call it.\n</think>\n\n<tool_call>{}</tool_call>"]]


@pytest.mark.parametrize("status", [503, 429, 500])
def test_retries_transient_failures_then_succeeds(upstream, status) -> None:
    app, url = upstream
    before = app.state.requests
    out = engine(url, {"fail_times": 2, "fail_status": status, "key": f"retry-{status}", "content": "ok"},
                 model="m").chat([CONV])
    assert out == [["ok"]]
    assert app.state.requests - before == 3


def test_gives_up_after_max_retries_with_a_clear_error(upstream) -> None:
    _, url = upstream
    with pytest.raises(EngineError, match=r"HTTP 503.*after 3 attempts"):
        engine(url, {"fail_times": 99, "key": "never"}, model="m", max_retries=2).chat([CONV])


def test_client_errors_are_not_retried(upstream) -> None:
    app, url = upstream
    before = app.state.requests
    with pytest.raises(EngineError, match="HTTP 400: scripted status 400"):
        engine(url, {"status": 400}, model="m").chat([CONV])
    assert app.state.requests - before == 1


def test_timeouts_are_retried_then_reported(upstream) -> None:
    _, url = upstream
    with pytest.raises(EngineError, match="timed out.*after 2 attempts"):
        engine(url, {"delay": 1.0}, model="m", timeout=0.2, max_retries=1).chat([CONV])


def test_malformed_response_is_an_engine_error(upstream) -> None:
    _, url = upstream
    with pytest.raises(EngineError, match="malformed response"):
        engine(url, {"malformed": True}, model="m").chat([CONV])


def test_unreachable_server_is_reported() -> None:
    with pytest.raises(EngineError, match="connection error"):
        make_engine("openai", base_url="http://127.0.0.1:9/v1", model="m", max_retries=1, backoff=0.01).chat([CONV])


def test_api_key_is_sent_but_never_logged(upstream, caplog, monkeypatch) -> None:
    app, url = upstream
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("MY_KEY_ENV", SECRET)
    eng = engine(url, {"fail_times": 1, "key": "auth", "content": "ok"}, model="m", api_key_env="MY_KEY_ENV")
    assert eng.chat([CONV]) == [["ok"]]
    assert app.state.auth_seen[-1] == f"Bearer {SECRET}"
    assert caplog.records, "the retry should have been logged"
    with pytest.raises(EngineError) as exc:
        engine(url, {"status": 401}, model="m", api_key=SECRET).chat([CONV])
    assert SECRET not in caplog.text and SECRET not in str(exc.value) and SECRET not in repr(eng)


def test_chat_works_inside_a_running_event_loop(upstream) -> None:
    import asyncio

    _, url = upstream

    async def inside() -> list[list[str]]:
        return engine(url, {"content": "ok"}, model="m").chat([CONV])

    assert asyncio.run(inside()) == [["ok"]]
