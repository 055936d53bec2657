"""The rows added for engines' newer parsers: each names its own text in detection and reads it back."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall

CALL = ToolCall("lookup_weather", {"town": "Lisbon", "days": 2})


@pytest.mark.parametrize("name", ["qwen25_coder_tools", "pangu", "granite_20b_fc", "hyperclovax_14b",
                                  "zaya_xml", "iquest_q1", "iquest_coder_v2", "gigachat35"])
def test_a_rendered_call_is_detected_as_its_row(name):
    fmt = formats.get(name)
    text = fmt.render([CALL, CALL])
    assert formats.detect_format(text) == name
    assert fmt.parse_strict(text) == [CALL, CALL]

