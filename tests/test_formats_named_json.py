"""The named_json grammar (a tool name, then its JSON arguments, between a family's tokens): PLaMo 3 and Functionary
v3.2 rows, written from vLLM's plamo3 parser and llama.cpp's functionary-v3-2 handler (DeepSeek's and Kimi-K2's rows:
tests/test_formats_deepseek.py, tests/test_formats_kimi_k2.py)."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats.catalog import rows_of
from refiner.formats.named_json import NamedJson
from refiner.formats.tags import MAX_TAG_HITS
from refiner.pipeline import Refiner

ROWS = [(row.family, row.spelling) for row in rows_of(NamedJson)]

PLAMO = formats.get("plamo3")
FUNC = formats.get("functionary_v32")


def _p(tag: str) -> str:
    return f"<|plamo:{tag}:plamo|>"


def _plamo_call(name: str, args: str) -> str:
    return (_p("begin_tool_request") + _p("begin_tool_name") + name + _p("end_tool_name") + _p("begin_tool_arguments")
            + args + _p("end_tool_arguments") + _p("end_tool_request"))


def test_rows_come_from_the_table():
    assert {PLAMO.name, FUNC.name, "step_audio_2", "solar_open", "deepseek_v3", "deepseek_v31", "kimi_k2",
            "multi_format_gptoss", "glm53_flash", "xing4_0", "cwm", "onyx", "functionary_v2", "react", "qwen_agent",
            "deepseek_coder_v2"} == {
        fam.name for fam, _ in ROWS}
    assert isinstance(PLAMO, NamedJson) and PLAMO.row.sources and FUNC.detection.bare
    for f in (PLAMO, FUNC):
        assert f.example == f.render(f.parse_strict(f.example))


def test_plamo_reads_the_parsers_layout_and_a_closer_inside_a_string():
    text = ("Checking." + _p("begin_tool_requests") + _plamo_call("get_weather", '{"city": "Tokyo"}')
            + _plamo_call("note", '{"s": "' + _p("end_tool_arguments") + '"}') + _p("end_tool_requests"))
    want = [ToolCall("get_weather", {"city": "Tokyo"}), ToolCall("note", {"s": _p("end_tool_arguments")})]
    assert PLAMO.parse_strict(text) == want and formats.detect_format(text) == "plamo3"
    broken = text.replace('"}' + _p("end_tool_arguments"), '"' + _p("end_tool_arguments"), 1)
    got = PLAMO.parse_lenient(broken)
    assert got.calls == want and not got.ok


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (_p("begin_tool_requests") + _plamo_call("get weather", "{}") + _p("end_tool_requests"), "tool name"),
        (_p("begin_tool_requests") + _plamo_call("f", "[1]") + _p("end_tool_requests"), "JSON object"),
        (_p("begin_tool_requests") + _plamo_call("f", "{}"), "missing"),
        (">>>f\n{} then\n>>>g\n{}", "a call after prose"),
        (">>>all\nonly text", "no call"),
    ],
)
def test_strict_rejects(text, words):
    fmt = FUNC if text.startswith(">>>") else PLAMO
    with pytest.raises(formats.FormatError, match=words):
        fmt.parse_strict(text)


def test_functionary_text_blocks_are_no_calls_and_a_cut_keeps_the_complete_calls():
    text = '>>>all\nLet me check.\n>>>get_weather\n{"city": "Hue"}\n>>>get_time\n{"tz": "Asia/Ho'
    got = FUNC.parse_lenient(text)
    assert got.calls[0] == ToolCall("get_weather", {"city": "Hue"}) and got.cut.index == 1 and not got.cut.clean
    res = Refiner().refine({"upstream": text})
    assert res["format"] == "functionary_v32" and [c["name"] for c in res["calls"]] == ["get_weather"]


def test_functionary_marker_in_prose_is_no_call():
    for text in ("In Python:\n>>> print(1)\n1", ">>>all\nHanoi is the capital."):
        assert Refiner().refine({"upstream": text})["calls"] == []
    assert not FUNC.sniff(">>> print(1)", 0) and FUNC.sniff(">>>get_weather\n{}", 0)


def test_junk_after_the_call_token_is_no_call():
    got = FUNC.parse_lenient(">>>not a name\n{}")
    assert got.calls == [] and "unreadable" in {p.code for p in got.problems}


def test_deepseek_v31_without_its_reading_policies_reads_as_its_row():
    """DeepSeek V3.1's spelling less its reading policies (what a chat template derives: no ``loose``, no ``also``)
    reads every valid corpus row as the catalog's row does and renders the same."""
    from dialect_corpus import READ_AS_MEANT, load

    from refiner.formats.catalog import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, SEP
    from refiner.formats.family import EXAMPLE_CALLS, Family, make_row
    from refiner.formats.named_json import NamedSpelling

    row = make_row(NamedJson, Family("deepseek_v31_row", "DeepSeek V3.1 as a row"),
                   NamedSpelling(CALLS_BEGIN, CALLS_END, CALL_BEGIN, SEP, CALL_END), 999)()
    module = formats.get("deepseek_v31")
    rows = [r for r in load() if r.format == "deepseek_v31" and r.kind in READ_AS_MEANT]
    assert len(rows) >= 5
    for r in rows:
        assert row.parse_strict(r.text) == module.parse_strict(r.text), r.where
    assert row.render(list(EXAMPLE_CALLS)) == module.render(list(EXAMPLE_CALLS))


@pytest.mark.parametrize("how", ["upper", "separator dropped", "lost >", "brackets"])
def test_plamo3_tokens_written_wrong_are_read_as_the_tokens(how):
    """PLaMo 3's long barred tokens, each written wrong in turn, are read as the tokens and reported."""
    fmt = formats.get("plamo3")
    call = ToolCall("get_weather", {"city": "Paris"})
    text = fmt.render([call])
    spell = {"upper": str.upper, "separator dropped": lambda t: t.replace("_", "", 1), "lost >": lambda t: t[:-1],
             "brackets": lambda t: "[" + t[1:-1] + "]"}[how]
    for tag in fmt.tags:
        damaged = text.replace(tag, spell(tag), 1)
        got = fmt.parse_lenient(damaged)
        assert got.calls == [call], (tag, damaged)
        assert any(p.code == "missing_tag" for p in got.problems)


V31 = formats.get("functionary_v31")


def test_functionary_v31_is_a_named_json_grammar_of_its_own():
    """Functionary v3.1's row: the named-JSON grammar's reader with its own detection and python tag, so not one of
    the grammar's plain rows."""
    assert isinstance(V31, NamedJson) and V31.name not in {fam.name for fam, _ in ROWS}
    assert V31.example == V31.render(V31.parse_strict(V31.example))
    assert V31.tags == ("<function=", ">", "</function>", "<|python_tag|>")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('<function=f>{"a": 1}', "expected </function>"),
        ('<function=f>["a"]</function>', "JSON object"),
        ('<function=f a>{}</function>', "tool name"),
        ('<function=f>{}</function> then <function=g>{}</function>', "a call after prose"),
        ("<|python_tag|>print(1)", "no <function="),
    ],
)
def test_functionary_v31_strict_rejects(text, words):
    with pytest.raises(formats.FormatError, match=words):
        V31.parse_strict(text)


def test_functionary_v31_puts_back_its_tags_where_the_grammar_puts_them():
    want = [ToolCall("get_weather", {"city": "Hue"}), ToolCall("get_time", {"tz": "UTC"})]
    for broken in ('<function=get_weather{"city": "Hue"}</function><function=get_time>{"tz": "UTC"}</function>',
                   'get_weather{"city": "Hue"}</function>get_time{"tz": "UTC"}</function>',
                   '<function=get_weather>{"city": "Hue"}[/function]<Function=get_time>{"tz": "UTC"}</function>'):
        got = V31.parse_lenient(broken)
        assert got.calls == want and {p.code for p in got.problems} == {"missing_tag"}, broken
    quoted = '<function=note>{"s": "</Function> and [/function]"}</function>'
    assert V31.parse_lenient(quoted).calls == [ToolCall("note", {"s": "</Function> and [/function]"})]
    assert V31.parse_lenient(quoted).ok


def test_functionary_v31_reads_a_tag_storm_as_written():
    """A text holding more tag tokens than tags.MAX_TAG_HITS is a storm, not an answer: no tag is put back in it (the
    scan stops there, so a 200 KB storm costs one bounded pass)."""
    broken = '<function=get_weather{"city": "Hue"}</function>'
    assert any(p.code == "missing_tag" for p in V31.parse_lenient(broken).problems)
    storm = broken + "</function>{" * (MAX_TAG_HITS + 1)
    assert not any(p.code == "missing_tag" for p in V31.parse_lenient(storm).problems)


def test_a_name_holding_another_formats_marker_is_no_name():
    """GLM-5.3-Flash's <tool_call>NAME> does not take multi_format_gptoss's <tool_call>to=functions.NAME whose
    `` json\\n`` was written as ``>``: ``to=functions.`` is harmony's marker, not part of a tool's name."""
    glm = formats.get("glm53_flash")
    lost = '<tool_call>to=functions.find>{"a": 1}\n</tool_call>\n'
    second = '<tool_call>to=functions.find json\n{"a": 2}\n</tool_call>'
    assert not glm.sniff(lost, 0) and glm.sniff('<tool_call>find>{"a": 1}', 0)
    with pytest.raises(formats.FormatError, match="not allowed"):
        glm.parse_strict(lost)
    assert glm.parse_strict('<tool_call>find>{"a": 1}') == [ToolCall("find", {"a": 1})]
    assert formats.detect_format(lost + second) == "multi_format_gptoss"
    res = Refiner().refine({"upstream": lost + second, "format": "multi_format_gptoss"})
    assert {"name": "find", "arguments": {"a": 2}} in res["calls"]
    assert all("to=" not in c["name"] for c in res["calls"])


@pytest.mark.parametrize("row", ["onyx", "functionary_v2", "solar_open"])
def test_another_formats_token_in_place_of_the_name_close_is_dropped_before_the_arguments(row):
    """A plain row's call whose token after the name was written as another format's token (a model mixing
    families): the name and the arguments' object around it are read, and the swap reported."""
    fmt = formats.get(row)
    calls = [ToolCall("get_weather", {"city": "Tokyo"}), ToolCall("get_time", {"zone": "JST"})]
    text = fmt.render(calls)
    anchor = fmt.layout.anchor
    for foreign in ("</function_list>", "<|content_invoke_tool_json|>", "[TOOL_ARGS]", "<|im_end|>[TOOL_ARGS]"):
        swapped = text.replace(anchor, foreign, 1)
        got = fmt.parse_lenient(swapped)
        assert got.calls == calls, (foreign, swapped)
        assert "missing_tag" in [p.code for p in got.problems]


@pytest.mark.parametrize("spelt", ["<|MESSAGE|>", "[|message|]", "<|message|", "<|Message|>"])
def test_onyx_reads_its_tokens_written_wrong_as_the_tokens(spelt):
    fmt = formats.get("onyx")
    calls = [ToolCall("get_weather", {"city": "Tokyo"}), ToolCall("get_time", {"zone": "JST"})]
    text = fmt.render(calls)
    for token, how in (("<|message|>", spelt), ("<|eom|>", spelt.replace("message", "eom").replace("MESSAGE", "EOM"))):
        got = fmt.parse_lenient(text.replace(token, how, 1))
        assert got.calls == calls, (token, how)


@pytest.mark.parametrize("row", [fam.name for fam, sp in ROWS if not (sp.python_call or sp.text_key)])
def test_a_key_that_lost_its_quote_keeps_the_calls_after_it(row):
    # The call token after the broken object reads as inside a string that runs on from the lost quote; it is still
    # where the next call starts, because the object closes before it and does not decode across it.
    fmt = formats.get(row)
    calls = [ToolCall("get_weather", {"city": c}) for c in ("Cancun", "Tulum", "Merida")]
    text = fmt.render(calls)
    assert text.count('"city": "Tulum"') == 1
    got = fmt.parse_lenient(text.replace('"city": "Tulum"', '"city: "Tulum"'))
    assert got.calls == calls


@pytest.mark.parametrize("text, value", [
    ('<tool_call>note>{"text": "write <tool_call>g>{\\"x\\": 1} in the doc"}<tool_call>save>{"path": "a.md", "n": 2',
     'write <tool_call>g>{"x": 1} in the doc'),  # a valid value holding a call, a later call cut
    ('<tool_call>note>{"text": "see <tool_call>g>{} here}<tool_call>save>{"path": "a.md"}', None),  # quote lost after
])
def test_a_call_written_in_a_string_value_is_no_call(text, value):
    got = formats.get("glm53_flash").parse_lenient(text)
    assert got.calls[0].name == "note" and got.calls[0].arguments.get("text") == value
    assert "g" not in [c.name for c in got.calls]



@pytest.mark.parametrize("row", ["plamo3", "solar_open"])  # (rows whose text before the first call token is no prose)
def test_a_first_call_whose_call_token_was_lost_is_read_by_its_name_and_object(row):
    fmt = formats.get(row)
    calls = [ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_time", {"zone": "CET"})]
    broken = fmt.render(calls).replace(fmt.layout.call, "", 1)
    got = fmt.parse_lenient(broken)
    assert got.calls == calls and f"missing {fmt.layout.call}" in [p.message for p in got.problems]
    no_object = fmt.parse_lenient(broken.replace('{"city": "Paris"}', '"Paris"'))  # a name without its object
    assert [c.name for c in no_object.calls] == ["get_time"]


@pytest.mark.parametrize("spelt", [" JSON\n", " js_on\n", " Json "])
def test_the_words_closing_a_name_written_otherwise_are_dropped_before_the_arguments(spelt):
    fmt = formats.get("multi_format_gptoss")  # (its name closes with ' json' and a line break)
    calls = [ToolCall("get_weather", {"city": "Tokyo"}), ToolCall("get_time", {"zone": "JST"})]
    got = fmt.parse_lenient(fmt.render(calls).replace(fmt.layout.anchor, spelt, 1))
    assert got.calls == calls and "missing_tag" in [p.code for p in got.problems]


def test_arguments_followed_by_another_object_are_the_first_object():
    # Every token lost: the first call's text runs on into the second's; its arguments are its own object, and
    # the text after it is reported dropped (repaired together, the two objects would merge or read as a list).
    got = formats.get("step_audio_2").parse_lenient('get_weather\n{"city": "Paris"}get_weather\n{"city": "Rome"}')
    assert got.calls == [ToolCall("get_weather", {"city": "Paris"})]
    assert any(p.code == "unreadable" and "Rome" in p.message for p in got.problems)


@pytest.mark.parametrize("closer", ["[/tool]", "</TOOL>", "<|end|>"])
def test_a_closer_written_wrong_after_whole_arguments_leaves_them_whole(closer):
    """CWM's ``</tool>`` written otherwise: the object before it is the arguments (not the object and the closer
    repaired into something else), the closer reported; a '}' written early still reads the members after it."""
    cwm = formats.get("cwm")
    calls = [ToolCall("get_weather", {"city": "Paris", "days": 2}), ToolCall("get_time", {"zone": "CET"})]
    text = cwm.render(calls).replace("</tool>", closer, 1)
    got = cwm.parse_lenient(text)
    assert got.calls == calls and "missing_tag" in [p.code for p in got.problems]
    early = cwm.parse_lenient('<tool: function>\nget_weather {"city": "Paris"}, "days": 2}\n</tool>')
    assert early.calls == calls[:1]
