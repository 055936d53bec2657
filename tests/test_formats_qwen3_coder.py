"""Qwen3-Coder XML tool calls (refiner/formats/qwen3_coder.py): the template's exact text, grammar edge cases, value
typing with and without tool specs, recovery, and detection against the other formats sharing ``<tool_call>``."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import FormatError
from refiner.pipeline import Refiner

Q = formats.get("qwen3_coder")


def block(name: str, *params: tuple[str, str]) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params)
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def test_render_is_the_chat_templates_text():
    calls = [ToolCall("get_weather", {"city": "Paris", "days": 3, "hourly": True, "filters": {"rain": None}}),
             ToolCall("get_time", {})]
    assert Q.render(calls) == (
        block("get_weather", ("city", "Paris"), ("days", "3"), ("hourly", "True"), ("filters", '{"rain": null}'))
        + "\n" + block("get_time")
    )


def test_whitespace_between_tags_is_free_and_one_newline_is_stripped_each_side():
    text = "<tool_call><function=f><parameter=a>x</parameter>  <parameter=b>\n\n y \n\n</parameter></function></tool_call>"
    assert Q.parse_strict(text) == [ToolCall("f", {"a": "x", "b": "\n y \n"})]


def test_a_value_holding_the_tags_is_read_whole():
    code = 'doc = """\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>\n"""'
    text = block("write_file", ("path", "a.py"), ("content", code)) + "\n" + block("run", ("cmd", "python a.py"))
    assert Q.parse_strict(text) == [ToolCall("write_file", {"path": "a.py", "content": code}),
                                    ToolCall("run", {"cmd": "python a.py"})]
    inline = "close with </parameter> then </function>"
    assert Q.parse_strict(block("note", ("text", inline))) == [ToolCall("note", {"text": inline})]


def test_values_holding_the_tags_round_trip():
    for value in ["a\n</parameter>\n<parameter=b>\n2", "</parameter>", "<parameter=x>", {"k": "</parameter>\n</function>"}]:
        call = ToolCall("f", {"v": value, "w": 1})
        assert Q.parse_strict(Q.render([call])) == [call]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<tool_call>\n<function=f>\n<parameter=a>\n1\n<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>",
         "unclosed parameter value"),
        ("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>", "unclosed parameter value"),
        ("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=a>\n2\n</parameter>\n</function>\n</tool_call>",
         "given twice"),
        ("<tool_call>\n<function=get weather>\n</function>\n</tool_call>", "not allowed"),
        ('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', "expected <function="),
        ("<tool_call>\n<function=f>\n</function>\n", "missing </tool_call>"),
        ("no calls here", "no <tool_call>"),
    ],
)
def test_strict_errors(text, message):
    with pytest.raises(FormatError, match=message):
        Q.parse_strict(text)


def test_empty_arguments_prose_and_reasoning_around():
    text = "<think>\nnothing to pass\n</think>\n\nChecking.\n\n" + block("get_time") + "\nDone."
    assert Q.parse_strict(text) == [ToolCall("get_time", {})]


def test_json_looking_strings_keep_their_type_without_specs():
    call = ToolCall("f", {"s": "42", "b": "True", "o": '{"a": 1}', "n": 42, "t": True, "x": "007"})
    text = Q.render([call])
    assert '<parameter=s>\n"42"\n' in text and "<parameter=x>\n007\n" in text and "<parameter=n>\n42\n" in text
    assert Q.parse_strict(text) == [call]


def test_quoted_parameter_names():
    call = ToolCall("f", {"a>b": 1, "line\nbreak": 2, '"q"': 3, "": 4})
    assert Q.parse_strict(Q.render([call])) == [call]


def test_the_tool_specs_settle_values_through_the_pipeline():
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {
        "zip": {"type": "string"}, "limit": {"type": "integer"}, "price": {"type": "number"}}}}}]
    text = block("lookup", ("zip", "94105"), ("limit", "5"), ("price", "12.50"))
    assert Q.parse_strict(text) == [ToolCall("lookup", {"zip": 94105, "limit": 5, "price": "12.50"})]
    res = Refiner().refine({"upstream": text, "tools": tools})
    assert res["format"] == "qwen3_coder" and res["stage"] == "unchanged"
    assert res["calls"] == [{"name": "lookup", "arguments": {"zip": "94105", "limit": 5, "price": 12.5}}]
    assert not res["upstream_diagnostics"]


def test_recovery_of_cut_and_broken_texts():
    cut = Q.parse_lenient(block("a", ("x", "1")) + "\n<tool_call>\n<function=run>\n<parameter=cmd>\nls -l")
    assert cut.calls == [ToolCall("a", {"x": 1}), ToolCall("run", {"cmd": "ls -l"})]
    assert {p.code for p in cut.problems} >= {"unclosed", "missing_tag"}
    in_name = Q.parse_lenient(block("a") + "\n<tool_call>\n<function=ru")
    assert in_name.calls == [ToolCall("a", {})] and in_name.problems
    lost = Q.parse_lenient("<function=f>\n<parameter=a>\nx\n<parameter=b>\ny\n</parameter>\n</tool_call>")
    assert lost.calls == [ToolCall("f", {"a": "x", "b": "y"})]
    assert [p.code for p in lost.problems].count("missing_tag") == 3  # <tool_call>, </parameter>, </function>
    junk = Q.parse_lenient('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>')
    assert junk.calls == [] and junk.problems


def test_detection_against_the_formats_sharing_tool_call():
    q = block("get_weather", ("city", "Paris"))
    assert formats.detect_format(q) == "qwen3_coder"
    assert formats.detect_format(q[: len(q) // 2]) == "qwen3_coder"  # broken: by sniffing
    assert formats.detect_format(q.replace("<tool_call>\n", "", 1)) == "qwen3_coder"  # <function= alone
    hermes = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert formats.detect_format(hermes) == "hermes"
    assert formats.detect_format(hermes[:40]) == "hermes"
    apibank = '<tool_call>\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n</tool_call>'
    assert formats.detect_format(apibank) == "apibank"
    assert formats.detect_format("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>") == "glm45"
    # JSON arguments inside the function tags (Functionary v3.1's <function=NAME>{...}</function>): that row's; this
    # reader recovers them too
    llama = '<function=get_weather>{"city": "Paris"}</function>'
    assert formats.detect_format(llama) == "functionary_v31"
    got = Q.parse_lenient(llama)
    assert got.calls == [ToolCall("get_weather", {"city": "Paris"})] and not got.ok


def test_render_refuses_what_the_format_cannot_write():
    for name in ("get weather", "a<b", "x>y", ""):
        with pytest.raises(formats.RenderError):
            Q.render([ToolCall(name, {})])
    with pytest.raises(formats.RenderError):
        Q.render([ToolCall("f", {"x": float("nan")})])


def test_hostile_inputs_give_problems_not_errors():
    for text in ["<parameter=" * 15_000, "</parameter>\n<parameter=a>" * 6_000, "<tool_call>\n<function=a>\n" * 7_000,
                 block("f", ("a", "</parameter>" * 15_000)), "<function=" + "a" * 190_000, "<function=a>{" * 15_000]:
        got = Q.parse_lenient(text)
        assert not [p for p in got.problems if p.code == "internal"]
        assert not Q.is_valid(text) or got.ok


CALL = ToolCall("get_weather", {"city": "Paris", "days": 2})
GOOD = Q.render([CALL])


@pytest.mark.parametrize(
    ("tag", "written"),
    [
        ("<function=", "<FUNCTION="), ("<function=", "[function="), ("<function=", "<func_tion="),
        ("<function=", "<|tool_call_begin|>"), ("<function=", "<fucntion="),
        ("<parameter=", "<PARAMETER="), ("<parameter=", "<param_eter="), ("<parameter=", "[parameter="),
        ("<parameter=", "<|message|>"), ("<parameter=", "<paramter="),
        ("</parameter>", "<parameter>"), ("</parameter>", "</parameter"), ("</parameter>", "[/parameter]"),
        ("</parameter>", "</PARAMETER>"), ("</parameter>", "</arg_value>"), ("</parameter>", "</para_meter>"),
        ("</function>", "</FUNCTION>"), ("</function>", "<function>"), ("</function>", "<|tool_call_end|>"),
        ("</tool_call>", "</TOOL_CALL>"),
    ],
)
def test_a_tag_written_wrong_is_read_where_the_grammar_expects_it(tag, written):
    text = GOOD.replace(tag, written, 1)
    assert not Q.is_valid(text)
    got = Q.parse_lenient(text)
    assert got.calls == [CALL] and got.cut is None
    assert any(p.code == "missing_tag" for p in got.problems)
    res = Refiner().refine({"upstream": text, "format": "qwen3_coder"})
    assert res["refined"] == GOOD, res


def test_lost_name_tags_are_put_back_where_the_text_places_them():
    for tag in ["<function=", "<parameter="]:
        text = GOOD.replace(tag, "", 1)
        assert Q.parse_lenient(text).calls == [CALL], tag
        assert Refiner().refine({"upstream": text, "format": "qwen3_coder"})["refined"] == GOOD
    # a lost </parameter> before </function> leaves the template's newlines on both sides of it
    text = block("f", ("a", "x")).replace("</parameter>", "")
    assert Q.parse_lenient(text).calls == [ToolCall("f", {"a": "x"})]
    # a line that is not KEY> is not a parameter
    text = block("f", ("a", "x")).replace("<parameter=a>", "some words here")
    assert Q.parse_lenient(text).calls != [ToolCall("f", {"a": "x"})]


def test_tag_like_text_inside_a_value_is_text():
    value = "see <PARAMETER=x> and [function=y] or <|endoftext|> in the docs"
    call = ToolCall("note", {"text": value})
    text = Q.render([call]).replace("</function>", "</FUNCTION>")
    assert Q.parse_lenient(text).calls == [call]


def test_a_text_cut_inside_a_tag_stays_cut():
    got = Q.parse_lenient("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter")
    assert got.cut is not None and got.cut.arguments == {}


WEATHER_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "zone": {"type": "string"}}}}}
    for n in ("get_weather", "get_time")]


def test_calls_whose_tags_were_all_dropped_are_read_by_the_offered_tools():
    two = Q.render([CALL, ToolCall("get_time", {"zone": "line one\n\nline three", "city": ""})])
    bare = two
    for tag in Q.tags:
        bare = bare.replace(tag, "")
    bare = bare.strip()
    assert bare.startswith("get_weather>\ncity>\nParis\n\ndays>\n2\n\n")
    res = Refiner().refine({"upstream": bare, "format": "qwen3_coder", "tools": WEATHER_TOOLS})
    assert res["refined"] == two, res
    assert Refiner().refine({"upstream": bare, "format": "qwen3_coder"})["calls"] == []
    offered = {"get_weather": ["city", "days"]}
    for prose in ["get_weather>\nParis\ncity>\nRome", "weather>\ncity>\nParis", "get_weather>", "get_weather>\n"
                  "town>\nParis"]:
        assert Q.read_untagged(prose, 0, offered) is None, prose
