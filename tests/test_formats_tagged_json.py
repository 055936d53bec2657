"""JSON calls behind a family's own tag (granite, phi4_mini, minimax, jamba, nemotron, internlm): grammar edge cases,
recovery, and detection where tags are shared (MiniMax vs Jamba/Hunyuan on <tool_calls>, Granite 3.1's <tool_call>
vs hermes/apibank)."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import FormatError, detect_format
from refiner.pipeline import Refiner

NAMES = ("granite", "phi4_mini", "minimax", "jamba", "nemotron", "internlm")
A, B = ToolCall("a", {"x": 1}), ToolCall("b", {"y": [1, {"z": None}]})


@pytest.mark.parametrize("name", NAMES)
def test_render_round_trip_detection_and_prose_around(name):
    fmt = formats.get(name)
    text = fmt.render([A, B])
    assert fmt.parse_strict(text) == [A, B]
    wrapped = f"<think>maybe [a] {{b}}</think>\nSure, calling now.\n{text}\nDone."
    assert fmt.parse_strict(wrapped) == [A, B]
    assert detect_format(text) == detect_format(wrapped) == name


def test_tool_calls_tag_is_told_apart_by_what_follows():
    minimax = '<tool_calls>\n{"name": "a", "arguments": {"x": 1}}\n</tool_calls>'
    jamba = '<tool_calls>[{"name": "a", "arguments": {"x": 1}}]</tool_calls>'
    assert detect_format(minimax) == "minimax" and detect_format(jamba) == "jamba"
    # broken texts: the same rule
    assert detect_format('<tool_calls>\n{"name": "a", "arguments": {"x": ') == "minimax"
    assert detect_format('<tool_calls>[{"name": "a", "arguments": {"x": ') == "jamba"
    assert detect_format("<tool_calls>") == "jamba"
    # and each reads the other's shape only leniently
    with pytest.raises(FormatError):
        formats.get("minimax").parse_strict(jamba)
    with pytest.raises(FormatError, match="must hold a JSON list"):
        formats.get("jamba").parse_strict(minimax)
    assert formats.get("jamba").parse_lenient(minimax).calls == [A]
    assert formats.get("minimax").parse_lenient(jamba).calls == [A]


def test_minimax_wants_one_object_per_line():
    mm = formats.get("minimax")
    two = '<tool_calls>\n{"name": "a", "arguments": {"x": 1}} {"name": "b", "arguments": {}}\n</tool_calls>'
    with pytest.raises(FormatError, match="one call object per line"):
        mm.parse_strict(two)
    got = mm.parse_lenient(two)
    assert got.calls == [A, ToolCall("b", {})] and not got.ok
    assert mm.parse_strict("<tool_calls>\n</tool_calls>") == []
    with pytest.raises(FormatError):
        mm.parse_strict('<tool_calls>\nsure: {"name": "a", "arguments": {}}\n</tool_calls>')


def test_granite_31_spelling_and_the_tool_call_formats():
    gr = formats.get("granite")
    text = '<tool_call>[{"name": "a", "arguments": {"x": 1}}]'
    assert gr.parse_strict(text) == [A] and detect_format(text) == "granite"
    assert detect_format('<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>') == "hermes"
    assert detect_format('<tool_call>\n{"name": "a", "parameters": {"x": 1}}\n</tool_call>') == "apibank"
    with pytest.raises(FormatError, match="followed by a JSON list"):
        gr.parse_strict('<|tool_call|>{"name": "a", "arguments": {}}')
    assert gr.parse_lenient('<|tool_call|>{"name": "a", "arguments": {"x": 1}}').calls == [A]


def test_phi4_marker_needs_the_bracket():
    ph = formats.get("phi4_mini")
    assert ph.parse_strict('functools[{"name": "a", "parameters": {"x": 1}}]') == [A]
    for text in ("functools.partial is handy.", "Use functools [sic] here."):
        assert detect_format(text) is None
    with pytest.raises(FormatError):
        ph.parse_strict('functools [{"name": "a", "arguments": {}}]')


def test_internlm_keys_and_one_object_per_action():
    il = formats.get("internlm")
    assert il.parse_strict('<|action_start|><|plugin|>\n{"name": "a", "arguments": {"x": 1}}<|action_end|>') == [A]
    for text, message in (
        ('<|action_start|><|plugin|>\n{"name": "a", "parameters": {}, "arguments": {}}<|action_end|>', "unexpected keys"),
        ('<|action_start|><|plugin|>\n[{"name": "a", "parameters": {}}]<|action_end|>', "one JSON call object"),
        ('<|action_start|><|plugin|>\n{"name": "a", "parameters": {}}', "without"),
    ):
        with pytest.raises(FormatError, match=message):
            il.parse_strict(text)


def test_nemotron_single_object_is_recovered_and_reported():
    nm = formats.get("nemotron")
    text = '<TOOLCALL>{"name": "a", "arguments": {"x": 1}}</TOOLCALL>'
    with pytest.raises(FormatError, match="must hold a JSON list"):
        nm.parse_strict(text)
    got = nm.parse_lenient(text)
    assert got.calls == [A] and not got.ok


@pytest.mark.parametrize("name", NAMES)
def test_values_holding_the_tags_are_text(name):
    fmt = formats.get(name)
    tags = " ".join((*fmt.tags, *fmt.detection.markers, *fmt.detection.closers))
    calls = [ToolCall("echo", {"text": f"quoted {tags} here"}), A]
    text = fmt.render(calls)
    assert fmt.parse_strict(text) == calls
    assert detect_format(text) == name


@pytest.mark.parametrize("name", NAMES)
def test_cut_text_keeps_the_complete_calls(name):
    fmt = formats.get(name)
    text = fmt.render([A, B])
    cut = text[: text.index('"y"') + 6]
    got = fmt.parse_lenient(cut)
    assert got.calls[0] == A and got.calls[1].name == "b" and not got.ok
    res = Refiner().refine({"upstream": cut})
    assert res["format"] == name and res["calls"][0] == {"name": "a", "arguments": {"x": 1}}


@pytest.mark.parametrize("name", ["minimax", "apibank", "jamba", "nemotron", "internlm"])
@pytest.mark.parametrize("which", ["open", "close"])
@pytest.mark.parametrize("how", ["upper", "dash", "bracket", "no_end", "foreign"])
def test_a_tag_written_wrong_keeps_every_call_of_its_block(name, which, how):
    fmt = formats.get(name)
    calls = [ToolCall("get_temp", {"city": "Seattle", "hours": 3}), ToolCall("get_temp", {"city": "Lima", "hours": 3}),
             B, ToolCall("c", {"q": "see [/tool_calls] and <toolcall> here"})]
    good = fmt.render(calls)
    tag = fmt.tags[0] if which == "open" else fmt.tags[-1]
    inner = tag.strip("<>/|")
    written = {
        "upper": tag.upper() if tag != tag.upper() else tag.lower(),
        "dash": tag.replace("_", "-") if "_" in tag else tag.replace(inner, inner[:3] + "_" + inner[3:]),
        "bracket": tag.replace("<", "[", 1).replace(">", "]"),
        "no_end": tag[:-1],
        "foreign": "<|tool_call_begin|>" if which == "open" else "<|tool_call_end|>",
    }[how]
    if name == "internlm" and how in ("upper", "dash", "bracket", "no_end"):
        pytest.skip("its tags are sentinel tokens, not words")
    text = good.replace(tag, written, 1) if which == "open" else good[::-1].replace(tag[::-1], written[::-1], 1)[::-1]
    if fmt.is_valid(text):
        pytest.skip("the change leaves a valid text")
    got = fmt.parse_lenient(text)
    assert got.calls == fmt.parse_strict(good), text
    res = Refiner().refine({"upstream": text, "format": name})
    assert res["refined"] == good, res


def test_a_tag_like_string_inside_a_call_is_text():
    fmt = formats.get("minimax")
    call = ToolCall("c", {"q": "x"})
    text = '[tool_calls]\n{"name": "c", "arguments": {"q": "[/tool_calls]"}}\n{"name": "c", "arguments": {"q": "x"}}\n'
    got = fmt.parse_lenient(text)
    assert got.calls == [ToolCall("c", {"q": "[/tool_calls]"}), call]


@pytest.mark.parametrize("name", ["minimax", "apibank"])
def test_a_call_line_that_lost_its_opening_brace(name):
    fmt = formats.get(name)
    calls = [ToolCall("get_temp", {"city": "Seattle", "hours": 3}), ToolCall("get_temp", {"city": "Lima", "hours": 3})]
    good = fmt.render(calls)
    for k in range(2):
        i = [j for j, ch in enumerate(good) if ch == "{" and good[j - 1] == "\n"][k]
        text = good[:i] + good[i + 1 :]
        assert fmt.parse_lenient(text).calls == calls, text
        assert Refiner().refine({"upstream": text, "format": name})["refined"] == good


def test_a_call_object_over_several_lines_keeps_its_brace():
    from refiner.formats.tags import brace_call_lines

    pretty = '\n{\n  "name": "f", "arguments": {"a": {"b": 1}}\n}\n'
    assert brace_call_lines(pretty) == pretty
    assert brace_call_lines('\n"name": "f", "arguments": {}}\n"name": "g", "arguments": {}}\n') == (
        '\n{"name": "f", "arguments": {}}\n{"name": "g", "arguments": {}}\n')


# Issue 20 rows: Apertus, Command A, GigaChat 3, Inkling (vLLM's apertus / gigachat3 / inkling parsers, llama.cpp's
# Command R7B handler).
NEW = ("apertus", "command_a", "gigachat3", "inkling")


@pytest.mark.parametrize("name", NEW)
def test_new_rows_round_trip_and_read_their_own_dialect(name):
    fmt = formats.get(name)
    calls = [A, B, ToolCall("c", {"s": "holds " + "".join(fmt.tags)})]
    text = fmt.render(calls)
    assert fmt.parse_strict(text) == calls and fmt.parse_lenient(text).calls == calls
    assert fmt.example == fmt.render(fmt.parse_strict(fmt.example))  # the example is the render


def test_apertus_calls_are_keyed_by_name():
    ap = formats.get("apertus")
    text = 'I will check. <|tools_prefix|>[{"get_weather": {"city": "Bern"}}, {"now": {}}]<|tools_suffix|>'
    assert ap.parse_strict(text) == [ToolCall("get_weather", {"city": "Bern"}), ToolCall("now", {})]
    with pytest.raises(FormatError, match="one key"):
        ap.parse_strict('<|tools_prefix|>[{"a": {}, "b": {}}]<|tools_suffix|>')
    cut = ap.parse_lenient('<|tools_prefix|>[{"a": {"x": 1}}, {"b": {"y": "ab')
    assert [c.name for c in cut.calls] == ["a", "b"] and cut.cut.index == 1 and not cut.cut.clean


def test_command_a_is_written_back_in_its_own_dialect():
    ca = formats.get("command_a")
    text = ('<|START_THINKING|>search first<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "a", '
            '"parameters": {"x": 1}}]<|END_ACTION|>')
    assert ca.parse_strict(text) == [A] and detect_format(text) == "command_a"
    res = Refiner().refine({"upstream": text})
    assert res["format"] == "command_a" and '"tool_name": "a"' in res["refined"]
    with pytest.raises(FormatError, match="unexpected keys"):
        ca.parse_strict('<|START_ACTION|>[{"tool_name": "a", "parameters": {}, "x": 1}]<|END_ACTION|>')


def test_gigachat_reads_both_call_tokens_and_inkling_its_args_key():
    gc = formats.get("gigachat3")
    assert gc.parse_strict('text<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "a", "arguments": {"x": 1}}') == [A]
    assert gc.parse_strict('<|function_call|>{"name": "a", "arguments": {"x": 1}}') == [A]
    ink = formats.get("inkling")
    assert ink.parse_strict('<|content_invoke_tool_json|>{"name": "a", "args": {"x": 1}}<|end_message|>') == [A]


@pytest.mark.parametrize("name", ["hermes", "function_gemma4", "k2_horizon_json", "rwkv", "glaive", "internlm",
                                  "phi4_mini_tags", "rubra"])
def test_a_key_that_lost_its_quote_keeps_the_blocks_after_it(name):
    # The close tag after the broken object reads as inside a string that runs on from the lost quote; it still
    # closes the block, because the object closes before it and does not decode across it.
    fmt = formats.get(name)
    calls = [ToolCall("get_weather", {"city": c}) for c in ("Cancun", "Tulum", "Merida")]
    text = fmt.render(calls)
    second = text.index('"name"', text.index('"name"') + 1)  # the middle call's key, its closing quote lost
    got = fmt.parse_lenient(text[:second] + '"name' + text[second + len('"name"'):])
    assert got.calls == calls


@pytest.mark.parametrize(("block", "want"), [
    ('\n{"name": "a", "parameters": {"x": 1}}\n', True),  # its argument key
    ('\n{"name": "a", "arguments": {"x": 1}}\n', False),  # hermes'
    ('\n{"name": "a", "param\\u0065ters": {"x": 1}}\n', True),  # the key spelt with an escape
    ('\n{"name": {"parameters": 1}, "arguments": {"x": 1}}\n', False),  # decoded: the first object's own keys
    ('\n{"name": "a", "parameters": {"x": ', True),  # undecoded: the key written first
    ("\n{'name': 'a', 'arguments': 1, 'parameters': 2", False),
    ('\n{"name": "a"}\n{"name": "b"}\n', True),  # neither key: several objects one per line
    ('\n\n  {"name": "a"}\n\t{"name": "b"}', True),
    ('\n{"name": "a"}\n', False),  # one object alone
    ('\nnote\n{"name": "a"}\n{"name": "b"}\n', False),  # a line before them that is not an object
    ('\n{"name": "a"}\nnote\n', False),
    ("\n<function=a>\n<parameter=x>\n1\n</parameter>\n</function>\n", False),  # another row's call
])
def test_apibank_claims_a_shared_tag_by_its_argument_key_or_its_lines(block, want):
    text = f"<tool_call>{block}</tool_call>"
    assert formats.get("apibank").sniff(text, 0) is want
