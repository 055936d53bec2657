"""``tool-refiner serve`` with a refiner model loaded in the proxy process (transformers and vLLM engines), started
for real with the CLI in front of the fake upstream. The tiny random Qwen3's answers are garbage, so the model stage
runs and the never-worse guard must fall back to the tier-1 result."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
import pytest
from fake_upstream import WEATHER_TOOLS, free_port, serve_in_subprocess

pytestmark = pytest.mark.slow

TOOLS = WEATHER_TOOLS
# An unknown tool: tier 1 cannot make it pass the gate, so the model is asked.
UNKNOWN = [{"name": "book_flight", "arguments": '{"to": "Paris"}', "id": "call_z"}]


def run_proxy(engine_args: list[str]) -> tuple[httpx.Response, httpx.Response]:
    py = sys.executable
    up_port, px_port = free_port(), free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with serve_in_subprocess([py, str(Path(__file__).with_name("fake_upstream.py")), str(up_port)], up_port) as up:
        cli = [py, "-m", "refiner.cli", "serve", "--upstream-base-url", up + "/v1", "--port", str(px_port),
               "--max-tokens", "8", "--no-thinking", "--log-level", "warning", *engine_args]
        with serve_in_subprocess(cli, px_port, health_path="/health", startup_timeout=420, env=env) as proxy:
            body = {"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS,
                    "x_fake": {"tool_calls": UNKNOWN}}
            r = httpx.post(proxy + "/v1/chat/completions", json=body, timeout=300)
            health = httpx.get(proxy + "/health")
    return r, health


@pytest.mark.parametrize("engine", ["hf", "vllm"])
def test_cli_proxy_with_an_in_process_refiner_model(engine, tiny_qwen3_dir) -> None:
    if engine == "vllm":
        pytest.importorskip("vllm")
        extra = ["--engine-arg", "dtype=float32", "--engine-arg", "max_model_len=2048", "--engine-arg",
                 "in_process=true", "--engine-arg", "cpu_kvcache_gib=1"]
    else:
        extra = []
    r, health = run_proxy(["--model", str(tiny_qwen3_dir), "--engine", engine, *extra])
    assert health.json()["model"] is True
    assert r.status_code == 200 and r.headers["x-tool-refiner"] == "fallback"
    call = r.json()["choices"][0]["message"]["tool_calls"][0]
    assert call["id"] == "call_z" and json.loads(call["function"]["arguments"]) == {"to": "Paris"}
