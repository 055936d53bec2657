"""The refiner prompt: Appendix A's structure, reasoning handling shared with the parsers."""

from __future__ import annotations

from refiner import formats
from refiner.calls import ToolCall
from refiner.prompt import SYSTEM_PROMPT, build_messages, extract_answer, format_hint, split_reasoning


def test_messages_carry_system_query_upstream_in_order():
    msgs = build_messages("SYS with tools", [{"role": "user", "content": "hi"}], "UP", format_hint=format_hint("xlam"))
    assert [m["role"] for m in msgs] == ["system", "user"] and msgs[0]["content"] == SYSTEM_PROMPT
    user = msgs[1]["content"]
    assert user.index("SYS with tools") < user.index("USER: hi") < user.index("UP") < user.index("xlam")


def test_reasoning_split_agrees_with_the_parsers():
    calls = [ToolCall("f", {"note": "a </think> inside a value"})]
    answer = formats.get("hermes").render(calls)
    gen = "<think>plan: call f</think>\n" + answer
    assert extract_answer(gen) == answer.strip()
    assert split_reasoning(gen) == ("plan: call f", answer.strip())
    assert formats.get("hermes").parse_strict(gen) == calls  # the parsers end reasoning at the same place
    assert split_reasoning("no reasoning") == (None, "no reasoning")
