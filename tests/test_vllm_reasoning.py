"""The vLLM reasoning-parser plugin (``ToolRefinerReasoningParser`` in ``refiner.proxy.vllm_plugin``) through vLLM's
own interface: loaded with ``ReasoningParserManager.import_reasoning_parser`` as ``--reasoning-parser-plugin`` does,
looked up as ``tool_refiner``, composed with the tool parser by vLLM's ``ParserManager`` as ``vllm serve
--reasoning-parser tool_refiner --tool-call-parser tool_refiner`` composes them, and fed canitoolcall's fixtures that
carry reasoning (real raw outputs with the expected parse), whole (``parse``) and streamed (``parse_delta`` with the
generation prompt's tokens, as the chat server calls it), judged by canitoolcall's own comparison."""

from __future__ import annotations

import pytest

vllm = pytest.importorskip("vllm")
canitoolcall = pytest.importorskip("canitoolcall")

from canitoolcall.checks import compare, expected_as_result, normalize_text
from canitoolcall.fixtures import load_fixtures
from canitoolcall.results import ParsedToolCall, ParseResult
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.parser.parser_manager import ParserManager
from vllm.reasoning.abs_reasoning_parsers import ReasoningParser, ReasoningParserManager

from benchmarks.bench_conformance import thinking_kwargs
from refiner.formats.reasoning import pairs

pytestmark = pytest.mark.vllm

# Families whose reasoning markers the registry knows (Gemma 4's and Kimi K3's are the "today's models" issue's).
FAMILIES = ("glm", "gpt-oss", "qwen3-hermes", "qwen3-xml", "deepseek", "mistral")
# Whole answers canitoolcall judges pass or soft pass (reasoning, content and calls) per family, measured: the rest
# are calls tier 1 does not read yet (other issues' work), never a reasoning split.
FLOORS = {"glm": 34, "gpt-oss": 23, "qwen3-hermes": 15, "qwen3-xml": 20, "deepseek": 3, "mistral": 10}


class CharTokenizer:
    """One token per character: token ids and text stay in step, so deltas can be cut anywhere."""

    def encode(self, text: str, **_: object) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int], **_: object) -> str:
        return "".join(map(chr, ids))

    def get_vocab(self) -> dict[str, int]:
        return {}


TOK = CharTokenizer()


@pytest.fixture(scope="module")
def parser_cls():
    ReasoningParserManager.import_reasoning_parser("refiner.proxy.vllm_plugin")
    return ParserManager.get_parser(tool_parser_name="tool_refiner", reasoning_parser_name="tool_refiner",
                                    enable_auto_tools=True)


def fixtures():
    return [f for f in load_fixtures(families=FAMILIES)
            if f.expected is not None and f.expected.reasoning_content and not f.truncated]


def setup(cls, fx):
    kwargs = thinking_kwargs(fx).get("chat_template_kwargs")
    req = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}], tools=list(fx.tools),
                                **({"chat_template_kwargs": kwargs} if kwargs else {}))
    return cls(TOK, req.tools, chat_template_kwargs=kwargs or {}), req


def unclosed(text: str) -> bool:
    return not any(closer in text for _, closer in pairs())


def whole(cls, fx) -> ParseResult:
    parser, req = setup(cls, fx)
    reasoning, content, calls = parser.parse(fx.raw_output, req, enable_auto_tools=True)
    return ParseResult(content=content, reasoning_content=reasoning,
                       tool_calls=tuple(ParsedToolCall(c.name, c.arguments) for c in calls or []))


def streamed(cls, fx, size: int) -> ParseResult:
    parser, req = setup(cls, fx)
    prompt = TOK.encode(fx.generation_prompt or "")
    text, reasoning, content, calls = fx.raw_output, [], [], {}
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    for k, piece in enumerate(pieces):
        d = parser.parse_delta(piece, TOK.encode(piece), req, prompt, finished=k == len(pieces) - 1)
        if d is None:
            continue
        reasoning.append(d.reasoning or "")
        content.append(d.content or "")
        for t in d.tool_calls or []:
            entry = calls.setdefault(t.index, ["", ""])
            entry[0] = (t.function.name if t.function else None) or entry[0]
            entry[1] += (t.function.arguments if t.function else None) or ""
    return ParseResult(content="".join(content) or None, reasoning_content="".join(reasoning) or None,
                       tool_calls=tuple(ParsedToolCall(*calls[k]) for k in sorted(calls)))


def test_the_plugin_registers_as_tool_refiner(parser_cls) -> None:
    cls = ReasoningParserManager.get_reasoning_parser("tool_refiner")
    assert issubclass(cls, ReasoningParser) and parser_cls.reasoning_parser_cls is cls


def test_canitoolcall_reasoning_fixtures_whole_and_streamed(parser_cls) -> None:
    cases = fixtures()
    assert len(cases) >= 120
    wrong_reasoning, differ, judged = [], [], dict.fromkeys(FAMILIES, 0)
    for fx in cases:
        want = expected_as_result(fx.expected)
        got = whole(parser_cls, fx)
        if normalize_text(got.reasoning_content, soft=True) != normalize_text(want.reasoning_content, soft=True):
            wrong_reasoning.append((fx.id, got.reasoning_content))
        judged[fx.family] += compare(want, got).name != "FAIL"
        for size in (2, 9):
            s = streamed(parser_cls, fx, size)
            if normalize_text(s.reasoning_content, soft=True) != normalize_text(want.reasoning_content, soft=True):
                wrong_reasoning.append((fx.id, size, s.reasoning_content))
            if unclosed(fx.raw_output) and got.tool_calls:
                # a block no closer ends, then a call: vLLM gives the tool parser the text after the block only once
                # the reasoning parser confirms it ended, which for such a block is known at the end of the stream;
                # the call's text then comes as content, nothing lost (docs/serving.md)
                if not (s.content or "").rstrip().endswith(fx.raw_output.rstrip()[-20:]):
                    differ.append((fx.id, size, s.to_dict(), got.to_dict()))
            elif compare(got, s).name == "FAIL":  # the stream reads as the whole answer does
                differ.append((fx.id, size, s.to_dict(), got.to_dict()))
    assert wrong_reasoning == [] and differ == []
    assert all(judged[f] >= FLOORS[f] for f in FAMILIES), judged


def test_prompt_and_request_say_where_the_block_is(parser_cls) -> None:
    cls = parser_cls.reasoning_parser_cls
    plain = cls(TOK)
    assert plain.is_reasoning_end(TOK.encode("<|im_start|>assistant\n<think>\n\n</think>\n\n"))  # template closed it
    assert not plain.is_reasoning_end(TOK.encode("<|im_start|>assistant\n<think>\n"))
    assert not plain.is_reasoning_end(TOK.encode("<think>old</think>answer<|im_start|>assistant\n"))
    req = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}])
    # no opener in the answer: a closer outside any call still ends a block; inside a call's value it is text
    assert plain.extract_reasoning("Plan.</think>\n\nHello", req) == ("Plan.", "Hello")
    value = '<tool_call>\n{"name": "f", "arguments": {"s": "a</think>b"}}\n</tool_call>'
    assert plain.extract_reasoning(value, req) == (None, value)
    hinted = cls(TOK, chat_template_kwargs={"enable_thinking": True})
    assert hinted.extract_reasoning("still thinking", req) == ("still thinking", None)
    ids = TOK.encode("Plan.</think>Hi")
    assert TOK.decode(plain.extract_content_ids(ids)) == "Hi" and plain.extract_content_ids(TOK.encode("a")) == []


def test_stream_holds_marker_pieces_and_the_blank_run(parser_cls) -> None:
    parser = parser_cls.reasoning_parser_cls(TOK)
    parser.adjust_initial_state_from_prompt(TOK.encode("<|im_start|>assistant\n<think>\n"))
    out = [parser.extract_reasoning_streaming("", "", p, [], [], []) for p in ["Pl", "an.</th", "ink>", "\n", "\n", "Hi"]]
    reasoning = "".join(d.reasoning or "" for d in out if d)
    content = "".join(d.content or "" for d in out if d)
    assert (reasoning, content) == ("Plan.", "Hi") and parser.has_engine_confirmed_reasoning_end()
    assert not any(d and "<" in (d.reasoning or "") for d in out)  # no part of the closer leaked


class TemplateTokenizer(CharTokenizer):
    """A tokenizer that carries its chat template (as Hugging Face tokenizers do)."""

    def __init__(self, chat_template: str) -> None:
        self.chat_template = chat_template


def test_the_served_template_says_where_the_block_is(parser_cls) -> None:
    """A whole answer with no hint: the served model's chat template (the tokenizer's) says whether its generation
    prompt opened the block: an answer cut inside its reasoning is reasoning when it did, the answer when it did
    not (then a closer with no opener is text)."""
    thinking = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")
    plain = thinking.replace("<think>\n", "")
    cls = parser_cls.reasoning_parser_cls
    req = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}])
    assert cls(TemplateTokenizer(thinking)).extract_reasoning("still thinking", req) == ("still thinking", None)
    assert cls(TemplateTokenizer(plain)).extract_reasoning("still thinking", req) == (None, "still thinking")
    assert cls(TemplateTokenizer(plain)).extract_reasoning("a</think>b", req) == (None, "a</think>b")
    assert cls(TOK).extract_reasoning("a</think>b", req) == ("a", "b")  # no template: the answer tells
