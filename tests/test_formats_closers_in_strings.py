"""Issue 20 item 4: a value that holds its format's own tags (``</tool_call>`` in Hermes JSON,
``<｜tool▁call▁end｜>`` in DeepSeek's, ...) is text inside a JSON string, in strict reading and also when the text is
broken elsewhere (lenient reading); and junk between a format's tags is no call."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall

# Formats whose arguments are JSON (or Gemma's quoted strings) inside tokens: a tag inside a string is text.
NAMES = ["hermes", "deepseek_v3", "deepseek_v31", "kimi_k2", "granite", "minimax", "jamba", "nemotron", "internlm",
         "apertus", "command_a", "inkling", "plamo3", "gemma4", "functiongemma"]


# brace_kv strings are raw text between quote tokens: a string cannot hold the quote token (render refuses it).
QUOTES = {"gemma4": '<|"|>', "functiongemma": "<escape>"}


def _calls(fmt: formats.WireFormat) -> list[ToolCall]:
    held = " ".join(t for t in dict.fromkeys((*fmt.tags, *fmt.detection.markers, *fmt.detection.closers))
                    if t != QUOTES.get(fmt.name))
    return [ToolCall("write_note", {"text": f"tags {held} are text", "n": 1}), ToolCall("get_time", {"tz": "UTC"})]


@pytest.mark.parametrize("name", NAMES)
def test_a_value_holding_the_formats_tags_reads_back(name):
    fmt = formats.get(name)
    calls = _calls(fmt)
    text = fmt.render(calls)
    assert fmt.parse_strict(text) == calls
    got = fmt.parse_lenient(text)
    assert got.ok and got.calls == calls


@pytest.mark.parametrize("name", NAMES)
def test_a_value_holding_the_formats_tags_survives_a_broken_text(name):
    """The same calls with the text's last closing tag lost, or a comma lost in the second call's arguments: the
    first call's value still holds every tag."""
    fmt = formats.get(name)
    calls = _calls(fmt)
    text = fmt.render(calls)
    last = fmt.tags[-1]
    broken = [text[: text.rfind(last)] if text.endswith(last) else text + " ..."]
    if '"tz": "UTC", ' not in text:
        broken.append(text.replace('"tz": "UTC"', '"tz": "UTC" "x": 1', 1))
    for b in broken:
        got = fmt.parse_lenient(b)
        assert got.calls and got.calls[0] == calls[0], (b, got.calls, got.problems)


@pytest.mark.parametrize("text", ["<tool_call>not valid json</tool_call>", "<think><tool_call>nah uhg</tool_call>"])
def test_junk_between_hermes_tags_is_no_call(text):
    got = formats.get("hermes").parse_lenient(text)
    assert got.calls == [] and not got.ok
