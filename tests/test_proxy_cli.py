"""``tool-refiner serve``: option wiring (which refiner it builds) and the help text."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from refiner.cli import app
from refiner.commands.serve import build_refiner, content_calls_setting, opens_reasoning_setting, parse_engine_args
from refiner.engines.openai_http import OpenAIEngine
from refiner.pipeline import Refiner


def test_without_a_model_the_proxy_runs_tier1_only() -> None:
    ref = build_refiner(model=None, refiner_base_url=None, engine=None)
    assert isinstance(ref, Refiner) and ref.engine is None


def test_refiner_base_url_builds_an_http_engine_reading_its_key_from_env(monkeypatch) -> None:
    monkeypatch.setenv("MY_REFINER_KEY", "sk-r")
    ref = build_refiner(model="refiner-1.7b", refiner_base_url="http://127.0.0.1:8001/v1", engine=None, n=3,
                        thinking=False, refiner_api_key_env="MY_REFINER_KEY")
    assert isinstance(ref.engine, OpenAIEngine)
    assert (ref.engine.base_url, ref.engine.model, ref.engine._api_key) == ("http://127.0.0.1:8001/v1",
                                                                             "refiner-1.7b", "sk-r")
    assert (ref.n, ref.thinking) == (3, False)


def test_serve_command_is_registered_and_requires_an_upstream() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["serve", "--help"])
    assert result.exit_code == 0 and "serve" in result.output
    # the options themselves (the help's layout is tests/test_cli.py's)
    serve = typer.main.get_command(app).commands["serve"]
    options = {opt for p in serve.params for opt in [*p.opts, *p.secondary_opts]}
    assert {"--upstream-base-url", "--refiner-base-url", "--max-body-mb", "--refine-timeout", "--workers",
            "--content-calls", "--heal-history", "--no-heal-history"} <= options
    result = runner.invoke(app, ["serve"])
    assert result.exit_code != 0


def test_engine_args_are_parsed_as_json_or_strings() -> None:
    assert parse_engine_args(["max_model_len=4096", "dtype=float32", "in_process=true", "x=a=b"]) == {
        "max_model_len": 4096, "dtype": "float32", "in_process": True, "x": "a=b"}
    with pytest.raises(typer.BadParameter, match="expected KEY=VALUE"):
        parse_engine_args(["novalue"])


def test_content_calls_option() -> None:
    assert content_calls_setting(None) == "auto" and content_calls_setting(["auto"]) == "auto"
    assert content_calls_setting(["off"]) == "off"
    assert content_calls_setting(["hermes", "xlam,glaive"]) == ("hermes", "xlam", "glaive")
    with pytest.raises(typer.BadParameter, match="cannot be combined"):
        content_calls_setting(["off", "hermes"])


def test_opens_reasoning_option() -> None:
    assert opens_reasoning_setting(None) == {}
    assert opens_reasoning_setting(["Qwen/Qwen3-8B=yes", "org/m=v1=no", "*=off"]) == {
        "Qwen/Qwen3-8B": True, "org/m=v1": False, "*": False}
    for bad in (["Qwen3"], ["m=maybe"], ["=yes"]):
        with pytest.raises(typer.BadParameter):
            opens_reasoning_setting(bad)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_serve_api_key_locks_the_proxy(monkeypatch, how) -> None:
    import uvicorn
    from starlette.testclient import TestClient

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    key = "tr-cli-KEY-never-shown"
    argv = ["serve", "--upstream-base-url", "http://127.0.0.1:9/v1", "--workers", "0", "--log-level", "warning"]
    if how == "flag":
        argv += ["--api-key", key]
    else:
        monkeypatch.setenv("TOOL_REFINER_API_KEY", key)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert key not in result.output and "clients need the API key" in result.output
    with TestClient(served["app"]) as client:
        assert client.get("/health").status_code == 200
        denied = client.get("/v1/models")
        assert denied.status_code == 401 and denied.json()["error"]["code"] == "invalid_api_key"
        # the right key passes authentication (the unreachable upstream then answers 502)
        assert client.get("/v1/models", headers={"authorization": f"Bearer {key}"}).status_code == 502


@pytest.mark.parametrize("setting", ["keep", "drop"])
def test_serve_unknown_tools_option_reaches_tier1(monkeypatch, setting) -> None:
    import uvicorn
    from fake_upstream import WEATHER_QUERY, WEATHER_TOOLS, create_fake_upstream, serve_in_thread
    from starlette.testclient import TestClient

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    offered = {"name": "get_weather", "arguments": '{"city": "Paris"}', "id": "call_a"}
    stray = {"name": "send_fax", "arguments": '{"to": "+33 1 23"}', "id": "call_b"}
    with serve_in_thread(create_fake_upstream()) as url:
        argv = ["serve", "--upstream-base-url", url + "/v1", "--workers", "0", "--log-level", "warning"]
        result = CliRunner().invoke(app, argv + ["--unknown-tools", setting])
        assert result.exit_code == 0, result.output
        with TestClient(served["app"]) as client:
            r = client.post("/v1/chat/completions", json={
                "model": "fake-model", "messages": [{"role": "user", "content": WEATHER_QUERY}],
                "tools": WEATHER_TOOLS, "x_fake": {"tool_calls": [offered, stray]}})
    names = [t["function"]["name"] for t in r.json()["choices"][0]["message"]["tool_calls"]]
    assert names == (["get_weather", "send_fax"] if setting == "keep" else ["get_weather"])
    bad = CliRunner().invoke(app, ["serve", "--upstream-base-url", "http://127.0.0.1:9/v1", "--unknown-tools", "x"])
    assert bad.exit_code != 0 and "--unknown-tools" in bad.output
