"""The rows added for engines' newer parsers: each names its own text in detection, and a close tag that prose
writes too (RWKV's code fence) names no family alone."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall

CALL = ToolCall("lookup_weather", {"town": "Lisbon", "days": 2})


@pytest.mark.parametrize("name", ["qwen25_coder_tools", "pangu", "granite_20b_fc", "hyperclovax_14b", "rwkv_fenced",
                                  "zaya_xml", "iquest_q1", "iquest_coder_v2", "gigachat35"])
def test_a_rendered_call_is_detected_as_its_row(name):
    fmt = formats.get(name)
    text = fmt.render([CALL, CALL])
    assert formats.detect_format(text) == name
    assert fmt.parse_strict(text) == [CALL, CALL]


def test_a_code_fence_in_prose_names_no_family():
    assert formats.detect_format("Run this:\n```\nls -la\n```\nthen look at the list.") is None


def test_the_fence_close_still_ends_an_rwkv_call():
    text = '**Tool Call:**\n```json\n{"name": "lookup_weather", "arguments": {"town": "Lisbon", "days": 2}}\n```'
    assert formats.get("rwkv_fenced").parse_strict(text) == [CALL]
