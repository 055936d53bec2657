"""The vLLM tool-parser plugin reads the served model's chat template from the tokenizer vLLM gives it and derives the
dialect when it starts (``Refiner(chat_template=...)``'s derivation): a family no catalog row knows is read; a
template nothing can be derived from leaves the format to detection, with one log line, and never stops the parser."""

from __future__ import annotations

import json
import logging

import pytest

vllm = pytest.importorskip("vllm")

from fake_upstream import WEATHER_TOOLS
from invented_families import FAMILIES, TOOLS, outputs
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.tool_parsers.abstract_tool_parser import ToolParserManager

from refiner.formats import base
from refiner.proxy import vllm_plugin

pytestmark = pytest.mark.vllm
ACTFN = next(f for f in FAMILIES if f.name == "actfn")


class Tokenizer:
    """What the parser reads of vLLM's tokenizer: its chat template and special tokens."""

    def __init__(self, template: str) -> None:
        self.chat_template = template
        self.eos_token = "<|/a|>"


@pytest.fixture
def parser_cls(monkeypatch):
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # a derived row stays in this test
    vllm_plugin._refiner_for.cache_clear()
    ToolParserManager.import_tool_parser("refiner.proxy.vllm_plugin")
    yield ToolParserManager.get_tool_parser("tool_refiner")
    vllm_plugin._refiner_for.cache_clear()


def request(tools) -> ChatCompletionRequest:
    return ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}], tools=list(tools))


def calls_of(info) -> list[tuple[str, dict]]:
    return [(t.function.name, json.loads(t.function.arguments)) for t in info.tool_calls]


def streamed_calls(parser, text: str, req, size: int) -> list[tuple[str, dict]]:
    deltas = [parser.extract_tool_calls_streaming("", "", text[i : i + size], [], [], [], req)
              for i in range(0, len(text), size)]
    return [(t.function.name, json.loads(t.function.arguments))
            for d in [*deltas, parser.finish_streaming()] if d is not None for t in d.tool_calls]


def test_the_served_template_s_dialect_is_read(parser_cls) -> None:
    req = request(TOOLS)
    cases = [o for o in outputs(ACTFN) if o.kind == "call"]
    plain = parser_cls(object(), req.tools)  # no template: detection, which knows no row of this family
    assert all(plain.extract_tool_calls(o.text, req).tool_calls == [] for o in cases)
    tokenizer = Tokenizer(ACTFN.template.read_text(encoding="utf-8"))
    read = 0
    for o in cases:
        want = [(c.name, dict(c.arguments)) for c in o.calls]
        info = parser_cls(tokenizer, req.tools).extract_tool_calls(o.text, req)
        read += calls_of(info) == want
        if calls_of(info) == want:
            assert streamed_calls(parser_cls(tokenizer, req.tools), o.text, req, 7) == want
    assert read >= 0.9 * len(cases)
    for o in outputs(ACTFN):
        if o.kind == "prose":
            info = parser_cls(tokenizer, req.tools).extract_tool_calls(o.text, req)
            assert info.tool_calls == [] and info.content == o.text


def test_a_template_nothing_derives_from_falls_back_to_detection(parser_cls, monkeypatch) -> None:
    # listened to on the deriving logger itself: the serve command's log set-up stops "refiner" lines from reaching
    # the root logger
    records: list[logging.LogRecord] = []
    listener = logging.Handler()
    listener.emit = records.append
    derive_log = logging.getLogger("refiner.formats.derive")
    monkeypatch.setattr(derive_log, "level", logging.WARNING)
    req = request(WEATHER_TOOLS)
    tokenizer = Tokenizer("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    derive_log.addHandler(listener)
    try:
        parser = parser_cls(tokenizer, req.tools)
    finally:
        derive_log.removeHandler(listener)
    said = [r for r in records if "no dialect derived" in r.getMessage()]
    assert len(said) == 1
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert calls_of(parser.extract_tool_calls(text, req)) == [("get_weather", {"city": "Paris"})]
