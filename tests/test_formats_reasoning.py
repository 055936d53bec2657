"""The reasoning split (refiner/formats/reasoning.py): a block only at the start of the answer, closed by a closer
that is not inside a call; every registered format reads back a call whose value holds a reasoning closer; the
answer's other parts (refiner/formats/message.py)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import message, reasoning
from refiner.formats.reasoning import calls_text, reasoning_offset, split_reasoning

CLOSERS = ["</think>", "[/THINK]", "<|end|>", "</think> and <think>", "x</think>\n\n<tool_call>"]


def _call_for(fmt, value: str) -> list[ToolCall]:
    args = {} if fmt.names_only else {"text": value}
    return [ToolCall("echo", args, step=0 if fmt.steps else None, outputs=("out",) if fmt.outputs else ())]


@pytest.mark.parametrize("name", formats.names())
@pytest.mark.parametrize("value", CLOSERS)
def test_a_value_holding_a_reasoning_closer_reads_back_in_every_format(name, value):
    fmt = formats.get(name)
    if fmt.detection.by_name:
        pytest.skip("no marker starts its calls: a closer in the first call's value ends reasoning the prompt opened")
    calls = _call_for(fmt, value)
    text = fmt.render(calls)
    assert fmt.parse_strict(text) == calls
    assert reasoning_offset(text) == 0
    # after a reasoning block, and after prose: the same calls
    assert fmt.parse_strict("<think>Check the echo tool.</think>\n\n" + text) == calls
    lenient = fmt.parse_lenient(text)
    assert lenient.calls == calls


def test_a_block_only_at_the_start_of_the_answer():
    assert split_reasoning("<think>plan</think>answer").reasoning("<think>plan</think>answer") == "plan"
    s = split_reasoning("  \n<think>plan</think>\n\nanswer")
    assert s.found and s.closed and "  \n<think>plan</think>\n\nanswer"[s.answer:] == "\n\nanswer"
    # a prompt that opened the block: the closer alone ends it (Qwen3 thinking, DeepSeek-R1, GLM)
    text = "the user wants Paris\n</think>\n\n<tool_call>\n{}\n</tool_call>"
    assert split_reasoning(text).reasoning(text) == "the user wants Paris\n"
    # ... but not a closer inside a call: the call began first, the closer is text in its value
    for text in ['<tool_call>\n{"name": "f", "arguments": {"s": "</think>"}}\n</tool_call>',
                 'Sure.\n<tool_call>\n{"name": "f", "arguments": {"s": "</think>"}}\n</tool_call>',
                 '[{"name": "f", "arguments": {"s": "</think>"}}]', '[f(s="</think>")]',
                 '<tool_call>\n<function=f>\n<parameter=s>\na</think>b\n</parameter>\n</function>\n</tool_call>']:
        assert not split_reasoning(text).found, text
    # a call drafted inside the reasoning, closed, then the closer: the reasoning ends at that closer
    text = "I will call <tool_call>{\"name\": \"f\"}</tool_call> now.</think>\n<tool_call>{\"name\": \"g\"}</tool_call>"
    assert split_reasoning(text).reasoning(text).endswith("now.")


def test_the_request_hint_and_unclosed_blocks():
    # opened: the answer starts inside the block, also without a closer (cut inside the reasoning)
    assert split_reasoning("The user wants the weather", opened=True).reasoning("The user wants the weather") == \
        "The user wants the weather"
    assert not split_reasoning("The user wants the weather").found
    # a block no closer ends stops where a call begins (vLLM's Qwen3 reader: an implicit end)
    text = "Need to look.\n<tool_call>\n<function=ls>\n</function>\n</tool_call>"
    s = split_reasoning(text, opened=True)
    assert s.reasoning(text) == "Need to look.\n" and text[s.answer:].startswith("<tool_call>")
    s = split_reasoning("<think>Need to look.\n<tool_call>{}</tool_call>")
    assert s.found and not s.closed and s.reasoning("<think>Need to look.\n<tool_call>{}</tool_call>") == \
        "Need to look.\n"
    # closed by the prompt: only an explicit opener starts one
    assert not split_reasoning("done</think>answer", opened=False).found
    assert split_reasoning("<think>x</think>answer", opened=False).found


def test_each_family_has_its_own_markers():
    magistral = "[THINK]Two cities.[/THINK][TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}"
    assert split_reasoning(magistral).reasoning(magistral) == "Two cities."
    assert formats.get("mistral_v11").parse_strict(magistral) == [ToolCall("get_weather", {"city": "Paris"})]
    harmony = ("<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>")
    assert split_reasoning(harmony).reasoning(harmony) == "Call it."
    assert formats.get("harmony").parse_strict(harmony) == [ToolCall("f", {"a": 1})]


@contextlib.contextmanager
def _family(**attrs):
    """A family's markers known for the duration (as registering its format would make them)."""
    saved = (dict(reasoning._PAIRS), set(reasoning._OPENERS), set(reasoning._CLOSERS))
    reasoning.learn(SimpleNamespace(tags=(), detection=None, **attrs))
    try:
        yield
    finally:
        reasoning._PAIRS.clear()
        reasoning._PAIRS.update(saved[0])
        reasoning._OPENERS.clear()
        reasoning._OPENERS.update(saved[1])
        reasoning._CLOSERS.clear()
        reasoning._CLOSERS.update(saved[2])
        reasoning._STATE.clear()


def test_a_registered_family_brings_its_reasoning_markers():
    text = "<|reflect>muse\nLive data needed.\n<reflect|>Let me check."  # markers no registered family writes
    assert not split_reasoning(text).found
    with _family(reasoning=(("<|reflect>muse", "<reflect|>"),)):
        assert split_reasoning(text).reasoning(text) == "\nLive data needed.\n"
    with _family(reasoning=(("<seed:think>", "</seed:think>"),)):
        text = "<seed:think>quote <seed:tool_call>f</seed:tool_call></seed:think>answer"
        assert split_reasoning(text).reasoning(text) == "quote <seed:tool_call>f</seed:tool_call>"


def test_calls_inside_reasoning_stay_reasoning_unless_switched():
    text = "<think>Draft: <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call></think>\nNo call needed."
    assert reasoning.CALLS_IN_REASONING is False
    assert formats.get("hermes").parse_lenient(text).calls == []
    assert formats.get("hermes").parse_lenient(calls_text(text)).calls == [ToolCall("f", {})]


def test_answer_parts_keep_the_text_around_the_calls():
    hermes = formats.get("hermes")
    text = 'Let me check.\n<tool_call>\n{"name": "f", "arguments": {"s": "</tool_call>"}}\n</tool_call>\nDone.<|im_end|>'
    assert hermes.answer_parts(text).content == "Let me check.\n\nDone."
    kimi = formats.get("kimi_k2")
    text = ("Before. <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
            "<|tool_call_end|><|tool_calls_section_end|> After.")
    assert kimi.answer_parts(text).content == "Before.  After."
    mistral = formats.get("mistral")
    assert mistral.answer_parts('[TOOL_CALLS][{"name": "f", "arguments": {"s": "]"}}] ok').content == " ok"
    harmony = formats.get("harmony")
    text = ("<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant to=functions.f<|channel|>commentary "
            "<|constrain|>json<|message|>{\"s\": \"<|call|>\"}<|call|><|start|>assistant<|channel|>final<|message|>"
            "Done")
    parts = harmony.answer_parts(text)
    assert parts.content == "Checking.Done" and parts.reasoning is None
    assert message.trim_turn_end("Hi<|eot_id|> \n") == "Hi"


def test_a_call_between_literals_that_are_no_markup():
    """RWKV's **Tool Call:** and Command R+'s Action:, each with a JSON code fence: a </think> inside the call's
    value ends no reasoning, a block no closer ends stops where such a call begins, and the answer's content keeps
    a fenced JSON example and a mention of the label while the call is cut out."""
    call = [ToolCall("note", {"text": "done </think> next"})]
    for name in ("rwkv", "command_r_plus"):
        fmt = formats.get(name)
        text = fmt.render(call)
        assert split_reasoning(text) == reasoning.NONE and fmt.parse_strict(text) == call
        before = "Plan the note.</think>\n"
        assert reasoning_offset(before + text) == len(before) - 1 and fmt.parse_strict(before + text) == call
        plain = fmt.render([ToolCall("note", {"text": "ok"})])
        unclosed = "<think>\nPlan the note.\n" + plain
        s = split_reasoning(unclosed)
        assert s.reasoning(unclosed) == "\nPlan the note.\n" and unclosed[s.answer :] == plain
        example = 'A saved note:\n```json\n{"name": "note", "arguments": {"text": "ok"}}\n```\n'
        mention = f"{name} writes {fmt.spelling.open.split()[0]} before its calls.\n"
        assert fmt.answer_parts(example + mention).content == example + mention
        assert fmt.answer_parts(example + mention + text + "\nSaved.").content == example + mention + "\nSaved."


def test_the_switch_is_the_same_in_the_pipeline():
    from refiner.pipeline import Refiner

    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    text = "<think>I will call <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call></think>\nDone."
    request = {"tools": tools, "upstream": text, "format": "hermes"}
    assert Refiner(engine=None).refine(request)["calls"] == []
    assert Refiner(engine=None, calls_in_reasoning=True).refine(request)["calls"] == [{"name": "f", "arguments": {}}]
    assert Refiner(engine=None).refine({**request, "calls_in_reasoning": True})["calls"] == [
        {"name": "f", "arguments": {}}]
    # the answer has a call of its own: the one in the reasoning is its draft, never a second call
    twice = text.replace("Done.", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>")
    assert Refiner(engine=None, calls_in_reasoning=True).refine({**request, "upstream": twice})["calls"] == [
        {"name": "f", "arguments": {}}]


def test_a_closer_inside_an_untagged_call_line_is_the_calls_text():
    """Granite's bare call lines have no tag before them: a [/THINK] inside the arguments of the call the text opens
    with is that call's text, not the end of reasoning (as inside an untagged [ or { list)."""
    fmt = formats.get("granite_pythonic")
    calls = [ToolCall("A", {"[/THINK]": None}), ToolCall("A", {})]
    text = fmt.render(calls)
    assert fmt.parse_strict(text) == calls
    assert split_reasoning(text).answer == 0
    assert split_reasoning("plan the call[/THINK]\nA()").answer > 0
