"""The rows added for engines' newer parsers: each names its own text in detection and reads it back."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall

CALL = ToolCall("lookup_weather", {"town": "Lisbon", "days": 2})


@pytest.mark.parametrize("name", ["qwen25_coder_tools", "pangu", "granite_20b_fc", "hyperclovax_14b",
                                  "zaya_xml", "iquest_q1", "iquest_coder_v2", "gigachat35", "step_audio_2",
                                  "solar_open2", "phi4_mini_tags"])
def test_a_rendered_call_is_detected_as_its_row(name):
    fmt = formats.get(name)
    text = fmt.render([CALL, CALL])
    assert formats.detect_format(text) == name
    assert fmt.parse_strict(text) == [CALL, CALL]



def test_a_glm_call_to_a_tool_named_function_stays_glm():
    text = "<tool_call>function\n<arg_key>town</arg_key>\n<arg_value>Lisbon</arg_value>\n</tool_call>"
    assert formats.detect_format(text) == "glm45"
    assert formats.get("glm45").parse_strict(text) == [ToolCall("function", {"town": "Lisbon"})]


def test_granite_list_and_the_phi4_tagged_object_share_an_opening_token_and_stay_apart():
    listed = '<|tool_call|>[{"name": "lookup_weather", "arguments": {"town": "Lisbon", "days": 2}}]'
    tagged = '<|tool_call|>{"name": "lookup_weather", "arguments": {"town": "Lisbon", "days": 2}}<|/tool_call|>'
    assert formats.detect_format(listed) == "granite"
    assert formats.detect_format(tagged) == "phi4_mini_tags"
    assert formats.get("granite").parse_strict(listed) == formats.get("phi4_mini_tags").parse_strict(tagged) == [CALL]
