"""The vLLM tool-parser plugin (``refiner.proxy.vllm_plugin``) through vLLM's own interface: loaded with
``ToolParserManager.import_tool_parser`` as ``--tool-parser-plugin`` does, looked up as ``tool_refiner``, fed
canitoolcall's fixtures (real raw outputs with the expected parse, judged by canitoolcall's own comparison) whole and
in chunks; tier-1 repair against the request's tools; and one real ``api_server`` start that loads it (slow)."""

from __future__ import annotations

import json
import os
import sys

import pytest

vllm = pytest.importorskip("vllm")
canitoolcall = pytest.importorskip("canitoolcall")

from canitoolcall.checks import compare, expected_as_result
from canitoolcall.fixtures import load_fixtures
from canitoolcall.results import ParsedToolCall, ParseResult
from fake_upstream import WEATHER_TOOLS, free_port, serve_in_subprocess
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.tool_parsers.abstract_tool_parser import ToolParserManager

pytestmark = pytest.mark.vllm

# Families whose every reasoning-free, uncut fixture tier 1 reads today (the others are other issues' work).
FAMILIES = ("qwen3-hermes", "llama", "mistral", "glm")


@pytest.fixture(scope="module")
def parser_cls():
    ToolParserManager.import_tool_parser("refiner.proxy.vllm_plugin")
    return ToolParserManager.get_tool_parser("tool_refiner")


def request(tools) -> ChatCompletionRequest:
    return ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}], tools=list(tools))


def whole(cls, text: str, req) -> ParseResult:
    info = cls(object(), req.tools).extract_tool_calls(text, req)
    calls = tuple(ParsedToolCall(t.function.name, t.function.arguments) for t in info.tool_calls)
    assert info.tools_called == bool(calls)
    return ParseResult(content=info.content, tool_calls=calls)


def streamed(cls, text: str, req, size: int) -> ParseResult:
    parser, content, calls = cls(object(), req.tools), [], {}
    deltas = [parser.extract_tool_calls_streaming("", "", text[i : i + size], [], [], [], req)
              for i in range(0, len(text), size)]
    for d in [*deltas, parser.finish_streaming()]:
        if d is None:
            continue
        content.append(d.content or "")
        for t in d.tool_calls:
            assert t.id and t.type == "function"  # each call whole in one delta
            calls[t.index] = ParsedToolCall(t.function.name, t.function.arguments)
    return ParseResult(content="".join(content) or None, tool_calls=tuple(calls[k] for k in sorted(calls)))


def test_the_plugin_registers_as_tool_refiner(parser_cls) -> None:
    from vllm.tool_parsers.abstract_tool_parser import ToolParser

    assert issubclass(parser_cls, ToolParser) and "tool_refiner" in ToolParserManager.list_registered()


def test_canitoolcall_fixtures_whole_and_streamed(parser_cls) -> None:
    fixtures = [f for f in load_fixtures(families=FAMILIES)
                if f.expected is not None and f.expected.reasoning_content is None and not f.truncated]
    assert len(fixtures) >= 90
    failed = []
    for fx in fixtures:
        req, want = request(fx.tools), expected_as_result(fx.expected)
        for how, got in [("whole", whole(parser_cls, fx.raw_output, req)),
                         *[(f"chunks of {n}", streamed(parser_cls, fx.raw_output, req, n)) for n in (1, 7)]]:
            if compare(want, got).name == "FAIL":
                failed.append((fx.id, how, got.to_dict()))
    assert failed == []


def test_tier1_repairs_against_the_request_tools(parser_cls) -> None:
    req = request(WEATHER_TOOLS)
    text = ("Let me look.\n<tool_call>\n{\"name\": \"get_wether\", \"arguments\": {'city': 'Paris', 'days': 3,}}\n"
            "</tool_call>")
    for got in (whole(parser_cls, text, req), streamed(parser_cls, text, req, 5)):
        assert got.content.strip() == "Let me look."  # (a stream sends the newline before it sees the call)
        assert [(c.name, json.loads(c.arguments_raw)) for c in got.tool_calls] == [
            ("get_weather", {"city": "Paris", "days": 3})]
    for prose in ("The [weather](https://example.com) is fine; get_weather() needs a city.", "{not a call}"):
        assert whole(parser_cls, prose, req) == ParseResult(content=prose)  # never worse: text stays text
        assert streamed(parser_cls, prose, req, 3) == ParseResult(content=prose)
    unknown = '<tool_call>\n{"name": "delete_everything", "arguments": {}}\n</tool_call>'
    assert whole(parser_cls, unknown, req).tool_calls == ()  # a call to no offered tool is not made a call
    none = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}], tools=WEATHER_TOOLS,
                                 tool_choice="none")
    assert whole(parser_cls, text, none) == streamed(parser_cls, text, none, 4) == ParseResult(content=text)
    no_tools = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}])
    assert whole(parser_cls, text, no_tools) == ParseResult(content=text)


@pytest.mark.slow
def test_api_server_loads_the_plugin_and_answers_a_tool_request(tiny_qwen3_dir) -> None:
    """The tiny random model writes what a regex forces it to (vLLM's structured outputs): a Hermes call with a
    misspelled tool name; the plugin returns it as a repaired tool call, streamed and not. The reasoning plugin is
    loaded beside it (the prompt closed the block: no reasoning)."""
    import httpx

    port = free_port()
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_qwen3_dir),
            "--served-model-name", "tiny-qwen3", "--dtype", "float32", "--max-model-len", "1024", "--enforce-eager",
            "--enable-auto-tool-choice", "--tool-parser-plugin", "refiner.proxy.vllm_plugin",
            "--tool-call-parser", "tool_refiner", "--reasoning-parser-plugin", "refiner.proxy.vllm_plugin",
            "--reasoning-parser", "tool_refiner", "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}
    forced = '<tool_call>\n{"name": "get_wether", "arguments": {"city": "Paris"}}\n</tool_call>'
    pattern = "".join("\\" + ch if ch in '{}[]().*+?^$|\\' else ch for ch in forced)
    body = {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": WEATHER_TOOLS, "max_tokens": 64, "temperature": 0,
            "chat_template_kwargs": {"enable_thinking": False}, "structured_outputs": {"regex": pattern}}
    with serve_in_subprocess(argv, port, startup_timeout=420, env=env) as url:
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=300)
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        (call,) = choice["message"]["tool_calls"]
        assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == ("get_weather",
                                                                                         {"city": "Paris"})
        assert choice["finish_reason"] == "tool_calls" and not choice["message"]["content"]
        assert not choice["message"].get("reasoning_content") and not choice["message"].get("reasoning")
        with httpx.stream("POST", url + "/v1/chat/completions", json={**body, "stream": True}, timeout=300) as s:
            chunks = [json.loads(line[5:]) for line in s.iter_lines()
                      if line.startswith("data:") and line.strip() != "data: [DONE]"]
        deltas = [t for c in chunks for ch in c["choices"] for t in ch["delta"].get("tool_calls") or []]
        assert [(t["function"]["name"], json.loads(t["function"]["arguments"])) for t in deltas] == [
            ("get_weather", {"city": "Paris"})]
        assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls" or any(
            ch.get("finish_reason") == "tool_calls" for c in chunks for ch in c["choices"])


def test_calls_are_sent_as_they_close(parser_cls) -> None:
    """Streamed, a call goes out in the delta that brings its closing tag, before the generation ends; two calls in
    one delta go out together; the calls at the end are only those not sent yet."""
    req = request(WEATHER_TOOLS)
    call = '<tool_call>\n{{"name": "get_time", "arguments": {{"tz": "{}"}}}}\n</tool_call>'
    parser = parser_cls(object(), req.tools)
    pieces = ["Checking.\n", call.format("CET")[:20], call.format("CET")[20:], "\n",
              call.format("UTC") + "\n" + call.format("GMT"), "\n<tool_call>\n{\"name\": \"get_ti"]
    out = [parser.extract_tool_calls_streaming("", "", p, [], [], [], req) for p in pieces]
    sent = [[(t.index, json.loads(t.function.arguments)["tz"]) for t in d.tool_calls] if d else [] for d in out]
    assert sent == [[], [], [(0, "CET")], [], [(1, "UTC"), (2, "GMT")], []]
    last = parser.finish_streaming()
    assert last is None or not last.tool_calls  # the call still open at the end is not a call
