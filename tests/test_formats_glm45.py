"""GLM-4.5/4.6 (and 4.7) XML tool calls (refiner/formats/glm45.py): the template's exact text, both layouts, grammar
edge cases, value typing, recovery, and detection against the other formats sharing ``<tool_call>``."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import FormatError
from refiner.pipeline import Refiner

G = formats.get("glm45")


def test_render_is_the_glm45_templates_text():
    calls = [ToolCall("get_weather", {"city": "北京", "days": 3, "detail": {"hourly": True}}), ToolCall("get_time", {})]
    assert G.render(calls) == (
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京</arg_value>\n<arg_key>days</arg_key>\n"
        '<arg_value>3</arg_value>\n<arg_key>detail</arg_key>\n<arg_value>{"hourly": true}</arg_value>\n</tool_call>\n'
        "<tool_call>get_time\n</tool_call>"
    )


def test_the_glm47_layout_without_newlines_is_the_same_grammar():
    text = ("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key>"
            "<arg_value>2</arg_value></tool_call><tool_call>get_time</tool_call>")
    assert G.parse_strict(text) == [ToolCall("get_weather", {"city": "Paris", "days": 2}), ToolCall("get_time", {})]
    assert formats.detect_format(text) == "glm45"


def test_values_are_exact_text_unless_the_template_would_write_json():
    text = ("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value> padded </arg_value>\n<arg_key>b</arg_key>\n"
            "<arg_value>True</arg_value>\n<arg_key>c</arg_key>\n<arg_value>null</arg_value>\n<arg_key>d</arg_key>\n"
            '<arg_value>"7"</arg_value>\n</tool_call>')
    assert G.parse_strict(text) == [ToolCall("f", {"a": " padded ", "b": "True", "c": None, "d": "7"})]


def test_a_value_quoting_the_tags_is_read_whole_and_round_trips():
    doc = "End a value with </arg_value> and a call with </tool_call>; pairs look like <arg_value>x</arg_value>."
    text = f"<tool_call>write\n<arg_key>text</arg_key>\n<arg_value>{doc}</arg_value>\n</tool_call>"
    assert G.parse_strict(text) == [ToolCall("write", {"text": doc})]
    for value in [doc, "a</arg_value>\n<arg_key>b</arg_key>\n<arg_value>c", "<arg_value>", {"k": "</arg_value>"}]:
        call = ToolCall("f", {"v": value, "</arg_key>": 1, '"k"': 2})
        assert G.parse_strict(G.render([call])) == [call]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1\n<arg_key>b</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
         "unclosed value"),
        ("<tool_call>f\n<arg_key>a</arg_key>\nx</arg_value>\n</tool_call>", "missing <arg_value> after key"),
        ("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n<arg_key>a</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
         "given twice"),
        ('<tool_call>\n{"name": "f"}\n</tool_call>', "without a tool name"),
        ("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n", "missing </tool_call>"),
    ],
)
def test_strict_errors(text, message):
    with pytest.raises(FormatError, match=message):
        G.parse_strict(text)


def test_tool_names_with_spaces_are_a_name_line():
    assert G.parse_strict("<tool_call>Get Stock Price\n<arg_key>t</arg_key>\n<arg_value>X</arg_value>\n</tool_call>") == [
        ToolCall("Get Stock Price", {"t": "X"})]
    with pytest.raises(formats.RenderError):
        G.render([ToolCall("two\nlines", {})])


def test_the_tool_specs_settle_values_through_the_pipeline():
    tools = [{"type": "function", "function": {"name": "cache_set", "parameters": {"type": "object", "properties": {
        "key": {"type": "string"}, "value": {"type": "string"}, "ttl": {"type": "integer"}}}}}]
    text = ("<tool_call>cache_set\n<arg_key>key</arg_key>\n<arg_value>42</arg_value>\n<arg_key>value</arg_key>\n"
            '<arg_value>{"a": [1, 2]}</arg_value>\n<arg_key>ttl</arg_key>\n<arg_value>3600</arg_value>\n</tool_call>')
    assert G.parse_strict(text)[0].arguments == {"key": 42, "value": {"a": [1, 2]}, "ttl": 3600}
    res = Refiner().refine({"upstream": text, "tools": tools})
    assert res["format"] == "glm45" and res["stage"] == "unchanged" and not res["upstream_diagnostics"]
    assert res["calls"][0]["arguments"] == {"key": "42", "value": '{"a": [1, 2]}', "ttl": 3600}


def test_recovery_of_cut_and_broken_texts():
    cut = G.parse_lenient("<think>x</think><tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n<arg_key>b</arg_key>\n<arg_value>hel")
    assert cut.calls == [ToolCall("f", {"a": 1, "b": "hel"})] and {p.code for p in cut.problems} >= {"unclosed", "missing_tag"}
    lost_value_tag = G.parse_lenient("<tool_call>f\n<arg_key>city</arg_key>\nOslo</arg_value>\n</tool_call>")
    assert lost_value_tag.calls == [ToolCall("f", {"city": "Oslo"})]
    lost_end = G.parse_lenient("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>x\n<arg_key>b</arg_key>\n<arg_value>y</arg_value>\n</tool_call>")
    assert lost_end.calls == [ToolCall("f", {"a": "x", "b": "y"})]
    name_only = G.parse_lenient("I would use <tool_call> blocks for that")
    assert name_only.calls == [] and name_only.problems


def test_detection_against_the_formats_sharing_tool_call():
    glm = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"
    assert formats.detect_format(glm) == "glm45"
    assert formats.detect_format(glm[:50]) == "glm45"
    assert formats.detect_format("<tool_call>get_time\n</tool_call>") == "glm45"
    assert formats.detect_format('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>') == "hermes"
    assert formats.detect_format('<tool_call>\n{"name": "get_time", "arguments": {') == "hermes"
    assert formats.detect_format('<tool_call>\n{"name": "get_time", "parameters": {}}\n</tool_call>') == "apibank"
    assert formats.detect_format("<tool_call>\n<function=get_time>\n</function>\n</tool_call>") == "qwen3_coder"
    assert formats.detect_format("<tool_call>\n</tool_call>") != "glm45"
    assert formats.detect_format("<arg_key>city</arg_key><arg_value>Paris</arg_value>") == "glm45"
    # prose that mentions the tag is not claimed
    assert formats.detect_format("Write a <tool_call> block to call a tool.") != "glm45"


def test_hostile_inputs_give_problems_not_errors():
    for text in ["<arg_value>" * 15_000, "</arg_value><arg_key>" * 8_000, "<tool_call>a\n" * 15_000,
                 "<tool_call>f<arg_key>a</arg_key><arg_value>" + "</arg_value>" * 15_000, "<tool_call>" + "a" * 190_000]:
        got = G.parse_lenient(text)
        assert not [p for p in got.problems if p.code == "internal"]
        assert got.ok == G.is_valid(text)


CALL = ToolCall("get_weather", {"city": "Paris", "days": 2})
GOOD = G.render([CALL])  # <tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n...


@pytest.mark.parametrize(
    ("tag", "written"),
    [
        ("<tool_call>", "<TOOL_CALL>"), ("<tool_call>", "<tool-call>"), ("<tool_call>", "<tool_call"),
        ("<tool_call>", "[tool_call]"), ("<tool_call>", "<|tool_call_begin|>"),
        ("<arg_key>", "<arg-key>"), ("<arg_key>", "<argkey>"), ("<arg_key>", "<arg_kye>"), ("<arg_key>", "<arg_key"),
        ("<arg_key>", "[TOOL_CALLS]"), ("</arg_key>", "</ARG_KEY>"), ("</arg_key>", "<arg_key>"),
        ("</arg_key>", "</arg-key>"), ("<arg_value>", "<ARG_VALUE>"), ("<arg_value>", "<argvalue>"),
        ("<arg_value>", "</function_calls>"), ("<arg_value>", "</TOOLCALL>"), ("</arg_value>", "<arg_value>"),
        ("</arg_value>", "</arg_valu>"), ("</arg_value>", "[/arg_value]"), ("</arg_value>", "<|endoftext|>"),
        ("</arg_value>", "</arg_value"), ("</tool_call>", "</TOOL_CALL>"), ("</tool_call>", "<｜tool▁call▁end｜>"),
    ],
)
def test_a_tag_written_wrong_is_read_where_the_grammar_expects_it(tag, written):
    # (one parameter: with two, a key that runs on to the next </arg_key> is a valid if odd key)
    call = ToolCall("get_weather", {"city": "Paris"})
    good = G.render([call])
    text = good.replace(tag, written, 1)
    assert not G.is_valid(text)
    got = G.parse_lenient(text)
    assert got.calls == [call] and got.cut is None
    assert any(p.code == "missing_tag" for p in got.problems)
    res = Refiner().refine({"upstream": text, "format": "glm45"})
    assert res["refined"] == good, res


def test_lost_opening_tags_are_put_back_where_the_text_places_them():
    two = G.render([CALL, ToolCall("get_time", {"zone": "UTC"})])
    # (a lost <tool_call> of any call but the last, or of the last, leaves a valid text: prose and calls)
    for text, good in [(two.replace("<arg_key>", "", 1), two), (GOOD.replace("<tool_call>", "", 1), GOOD)]:
        assert not G.is_valid(text)
        assert G.parse_lenient(text).calls == G.parse_strict(good), text
        assert Refiner().refine({"upstream": text, "format": "glm45"})["refined"] == good
    # the GLM-4.7 layout: the name and the first key share a line, so a lost <arg_key> there cannot be placed
    glued = "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
    assert G.parse_lenient(glued.replace("<arg_key>", "", 1)).calls != [ToolCall("get_weather", {"city": "Paris"})]
    # prose above a key is not a tool name
    assert G.parse_lenient("I will look it up now.\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>").calls == []


def test_tag_like_text_inside_a_value_is_text():
    value = "use <b>bold</b> or [tool_call] and <|endoftext|> here"
    call = ToolCall("note", {"text": value})
    text = G.render([call]).replace("</tool_call>", "</TOOL_CALL>")
    assert G.parse_lenient(text).calls == [call]


def test_a_text_cut_inside_a_tag_stays_cut():
    cut = G.parse_lenient("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value")
    assert cut.cut is not None and cut.cut.arguments == {}
    assert G.parse_lenient("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n<arg_ke").cut.arguments == {
        "a": 1}


WEATHER_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "zone": {"type": "string"}}}}}
    for n in ("get_weather", "get_time")]


def _strip_tags(text: str) -> str:
    for tag in G.tags:
        text = text.replace(tag, "")
    return text.strip()


def test_calls_whose_tags_were_all_dropped_are_read_by_the_offered_tools():
    # GLM's tags are special tokens: a decoder that skips them leaves the name, key and value lines
    two = G.render([CALL, ToolCall("get_time", {"city": "", "zone": "UTC"})])
    bare = _strip_tags(two)
    assert bare == "get_weather\ncity\nParis\ndays\n2\n\nget_time\ncity\n\nzone\nUTC"
    res = Refiner().refine({"upstream": bare, "format": "glm45", "tools": WEATHER_TOOLS})
    assert res["refined"] == two, res
    assert Refiner().refine({"upstream": "Here you go.\n" + bare, "format": "glm45", "tools": WEATHER_TOOLS})[
        "refined"] == two
    # without tools, or with lines that are not the offered tools' names and parameters, it is prose
    assert Refiner().refine({"upstream": bare, "format": "glm45"})["calls"] == []
    for prose in ["get_weather\ncity\nParis\nthen I will tell you more", "weather\ncity\nParis",
                  "get_weather\ntown\nParis", "get_weather\ncity\nParis\ncity\nRome", "get_weather\n\ncity\nParis",
                  "get_weather\ncity", "get_weather"]:
        got = G.read_untagged(prose, 0, {"get_weather": ["city", "days"]})
        assert got is None, prose
        assert Refiner().refine({"upstream": prose, "format": "glm45", "tools": WEATHER_TOOLS})["calls"] == [], prose




def test_a_stray_value_end_after_the_name_of_a_call_without_arguments_is_dropped():
    # GLM-5 has been seen writing "<tool_call>NAME</arg_value></tool_call>" for a call without arguments
    text = "<tool_call>list_mailboxes</arg_value></tool_call>"
    assert not G.is_valid(text)
    assert G.parse_lenient(text).calls == [ToolCall("list_mailboxes", {})]
    assert Refiner().refine({"upstream": text, "format": "glm45"})["refined"] == "<tool_call>list_mailboxes\n</tool_call>"
    assert G.parse_lenient("<tool_call>list_mailboxes</arg_value>").calls == []  # no end: nothing to read as a call


@pytest.mark.parametrize("upstream", ["<tool_call>not valid json</tool_call>", "<think><tool_call>nah uhg</tool_call>"])
def test_words_between_call_tags_are_not_a_call(upstream):
    """Junk between Hermes' / GLM's shared tag is not a call named after it; a one-word name alone still
    is GLM's argument-less call, and a spaced name alone is read when the request offers that tool."""
    from refiner.pipeline import Refiner

    tools = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
    assert Refiner().refine({"tools": tools, "query": "q", "upstream": upstream})["calls"] == []
    with pytest.raises(formats.FormatError):
        formats.get("glm45").parse_strict("<tool_call>not valid json</tool_call>")
    assert formats.get("glm45").parse_strict("<tool_call>get_time</tool_call>") == [ToolCall("get_time", {})]
    spaced = formats.get("glm45").parse_lenient("<tool_call>Get Weather</tool_call>", tools={"Get Weather": []})
    assert spaced.calls == [ToolCall("Get Weather", {})]
    with pytest.raises(formats.RenderError):
        formats.get("glm45").render([ToolCall("Get Weather", {})])


def test_a_python_call_between_the_call_tags_is_no_argument_less_call():
    """A name line holding a parenthesis is a Python call written in the shared <tool_call> tags (SGLang's
    multi_format python layout), not a GLM call without arguments: glm45 does not read it, so a broken one is read
    in the Python layout and keeps its arguments."""
    for text in ("<tool_call>area(radius=5</tool_call>", "<tool_call>draw(cards3)</tool_call>"):
        with pytest.raises(FormatError, match="is text, not a call"):
            G.parse_strict(text)
        assert formats.detect_format(text) != "glm45"
    assert G.parse_lenient("<tool_call>area(radius=5)</tool_call>").calls == []
    with pytest.raises(formats.RenderError):
        G.render([ToolCall("area(radius=5)", {})])
    assert G.parse_strict("<tool_call>get_time\n</tool_call>") == [ToolCall("get_time", {})]
    tools = [{"type": "function", "function": {"name": "area", "parameters": {"type": "object", "properties": {
        "radius": {"type": "integer"}}}}}]
    res = Refiner().refine({"upstream": "<tool_call>area(radius=5</tool_call>", "format": "multi_format_python",
                            "tools": tools})
    assert res["calls"] == [{"name": "area", "arguments": {"radius": 5}}]
