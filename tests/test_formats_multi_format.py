"""The rows of SGLang's multi_format parser (one parser, a layout per request's ``tool_format``): its ``minimax``
layout is a row of the XML grammar. It shares its section tag ``<tool_calls>`` with other rows (MiniMax's JSON lines,
Jamba, Hunyuan), is told from them by what follows the tag, and leaves their texts to them."""

from __future__ import annotations

from refiner import formats
from refiner.calls import ToolCall
from refiner.pipeline import Refiner

MINIMAX = formats.get("multi_format_minimax")
CALLS = [ToolCall("water_plants", {"zone": "north", "litres": 12.5}), ToolCall("log_event", {"tags": ["a", 1]})]


def test_a_rendered_turn_is_detected_as_its_row_and_reads_back():
    text = MINIMAX.render(CALLS)
    assert formats.detect_format(text) == MINIMAX.name and MINIMAX.parse_strict(text) == CALLS
    res = Refiner().refine({"upstream": "Watering now.\n" + text})
    assert res["format"] == MINIMAX.name and [c["name"] for c in res["calls"]] == ["water_plants", "log_event"]


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
