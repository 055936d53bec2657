"""The rows of SGLang's multi_format parser (one parser, a layout per request's ``tool_format``): its ``gptoss``
layout is a row of the named-JSON grammar, its ``minimax`` layout a row of the XML grammar, its ``python`` layout
a row of the pythonic sentinel grammar (its ``default``, ``qwen3`` and ``glm`` layouts are the
Hermes, Qwen3-Coder and GLM rows). Each shares its outer tag with other rows (``<tool_call>``: Hermes, GLM,
Qwen3-Coder; ``<tool_calls>``: MiniMax's JSON lines, Jamba, Hunyuan); each is told from them by what follows the tag,
and leaves their texts to them."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.pipeline import Refiner

GPTOSS = formats.get("multi_format_gptoss")
MINIMAX = formats.get("multi_format_minimax")
PYTHON = formats.get("multi_format_python")
CALLS = [ToolCall("water_plants", {"zone": "north", "litres": 12.5}), ToolCall("log_event", {"tags": ["a", 1]})]


@pytest.mark.parametrize("fmt", [GPTOSS, MINIMAX, PYTHON], ids=lambda f: f.name)
def test_a_rendered_turn_is_detected_as_its_row_and_reads_back(fmt):
    text = fmt.render(CALLS)
    assert formats.detect_format(text) == fmt.name and fmt.parse_strict(text) == CALLS
    res = Refiner().refine({"upstream": "Watering now.\n" + text})
    assert res["format"] == fmt.name and [c["name"] for c in res["calls"]] == ["water_plants", "log_event"]


def test_the_gptoss_layout_and_the_rows_sharing_its_tag_keep_their_texts():
    gpt = '<tool_call>to=functions.water_plants json\n{"zone": "east"}\n</tool_call>'
    hermes = '<tool_call>\n{"name": "water_plants", "arguments": {"zone": "east"}}\n</tool_call>'
    glm = "<tool_call>water_plants\n<arg_key>zone</arg_key>\n<arg_value>east</arg_value>\n</tool_call>"
    assert [formats.detect_format(t) for t in (gpt, hermes, glm)] == ["multi_format_gptoss", "hermes", "glm45"]
    # its closing tag lost: still this row, the call read
    res = Refiner().refine({"upstream": gpt.removesuffix("</tool_call>")})
    assert res["format"] == "multi_format_gptoss" and res["calls"][0]["arguments"] == {"zone": "east"}
    with pytest.raises(formats.FormatError):
        GPTOSS.parse_strict("<tool_call>to=functions.water plants json\n{}\n</tool_call>")


def test_the_minimax_layout_and_the_rows_sharing_its_section_keep_their_texts():
    xml = '<tool_calls>\n<invoke name="water_plants">\n<parameter name="zone">east</parameter>\n</invoke>\n</tool_calls>'
    lines = '<tool_calls>\n{"name": "water_plants", "arguments": {"zone": "east"}}\n</tool_calls>'
    listed = '<tool_calls>[{"name": "water_plants", "arguments": {"zone": "east"}}]</tool_calls>'
    hunyuan = ("<tool_calls><tool_call>water_plants<tool_sep><arg_key>zone</arg_key><arg_value>east</arg_value>"
               "</tool_call></tool_calls>")
    got = [formats.detect_format(t) for t in (xml, lines, listed, hunyuan)]
    assert got == ["multi_format_minimax", "minimax", "jamba", "hunyuan_v3"]
    # its section's closer lost, or the text cut in a value: the whole calls only
    assert MINIMAX.parse_lenient(xml.removesuffix("\n</tool_calls>")).calls == [ToolCall("water_plants", {"zone": "east"})]
    assert Refiner().refine({"upstream": xml[: xml.index("east") + 2], "finish_reason": "length"})["calls"] == []


def test_the_python_layout_and_the_rows_sharing_its_tag_keep_their_texts():
    py = '<tool_call>\nwater_plants(zone="east", litres=3)\n</tool_call>'
    hermes = '<tool_call>\n{"name": "water_plants", "arguments": {"zone": "east"}}\n</tool_call>'
    glm = "<tool_call>water_plants\n<arg_key>zone</arg_key>\n<arg_value>east</arg_value>\n</tool_call>"
    bare = "<tool_call>water_plants</tool_call>"
    listed = '<tool_call>[water_plants(zone="east")]</tool_call>'  # a list is no statement: Hermes' (read by salvage)
    got = [formats.detect_format(t) for t in (py, hermes, glm, bare, listed)]
    assert got == ["multi_format_python", "hermes", "glm45", "glm45", "hermes"]
    # its closing tag lost: still this row, the call read
    res = Refiner().refine({"upstream": py.removesuffix("</tool_call>")})
    assert res["format"] == "multi_format_python" and res["calls"][0]["arguments"] == {"zone": "east", "litres": 3}
