"""Kimi K3's XTML calls (the ``kimi_k3`` row of the XML grammar, its hook ``refiner.formats.kimi_k3``): the typing
attribute, attribute escaping, markers inside values, detection, recovery of broken and cut texts, and bounded work
on hostile texts. Texts are written the way
SGLang's ``kimik3_detector.py`` and vLLM's ``kimi_k3_tool_parser.py`` read them; the per-family corpus
(``tests/corpus/families/kimi-k3.jsonl``, ``test_family_corpus.py``) covers the layouts a K3 completion takes."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import xml_lenient
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS
from refiner.pipeline import Refiner

K3 = formats.get("kimi_k3")
O, C, S = "<|open|>", "<|close|>", "<|sep|>"


def arg(key: str, value: str, typ: str = "string") -> str:
    return f'{O}argument key="{key}" type="{typ}"{S}{value}{C}argument{S}'


def call(name: str, *args: str, index: int = 1) -> str:
    return f'{O}call tool="{name}" index="{index}"{S}' + "".join(args) + f"{C}call{S}"


def tools(*calls: str) -> str:
    return f"{O}tools{S}" + "".join(calls) + f"{C}tools{S}"


def test_types_follow_the_type_attribute():
    text = tools(call("f", arg("s", "5"), arg("n", "5", "number"), arg("i", "7", "integer"), arg("b", "false", "boolean"),
                      arg("z", "null", "null"), arg("l", '["a", 1]', "array"), arg("o", '{"k": {"x": [1]}}', "object")))
    assert K3.parse_strict(text) == [ToolCall("f", {"s": "5", "n": 5, "i": 7, "b": False, "z": None, "l": ["a", 1],
                                                    "o": {"k": {"x": [1]}}})]


def test_a_completion_framed_by_its_channels_reads_the_tools_channel():
    text = ("Plan it.<|close|>think<|sep|><|open|>response<|sep|>On it.<|close|>response<|sep|>"
            + tools(call("get_weather", arg("city", "Paris")), call("get_time", index=2)) + f"{C}message{S}")
    assert K3.parse_strict(text) == [ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_time", {})]
    assert formats.detect_format(text) == "kimi_k3"


def test_attribute_values_are_unescaped_and_rendered_escaped():
    text = tools(call("save", arg("q&amp;a", "fish & chips"), arg("say &quot;hi&quot;", 'she said "hi"')))
    calls = [ToolCall("save", {"q&a": "fish & chips", 'say "hi"': 'she said "hi"'})]
    assert K3.parse_strict(text) == calls
    odd = [ToolCall("a&b", {"": "x", "<|sep|>": 1, "k\nl": [None], 'say "hi" & <go>': "q"})]
    assert K3.parse_strict(K3.render(odd)) == odd
    with pytest.raises(formats.RenderError):  # a tool name is a name: no space, quote or angle bracket
        K3.render([ToolCall('a "b" <c>', {})])


def test_string_values_are_raw_and_may_hold_the_closing_text():
    value = f"{C}argument{S} is how args end\n\t\\ \"q\""
    text = tools(call("write", arg("content", value), arg("path", "x.txt")))
    assert K3.parse_strict(text) == [ToolCall("write", {"content": value, "path": "x.txt"})]
    assert K3.parse_strict(K3.render([ToolCall("write", {"content": value})])) == [ToolCall("write", {"content": value})]


def test_markers_inside_a_json_value_are_text():
    inner = f"{C}argument{S}{C}call{S}{C}tools{S}"
    text = tools(call("f", arg("o", '{"a": "' + inner + '"}', "object")))
    assert K3.parse_strict(text) == [ToolCall("f", {"o": {"a": inner}})]


def test_a_string_that_cannot_read_back_is_refused():
    value = f'x{C}argument{S}{O}argument key="k"{S}'
    with pytest.raises(formats.RenderError):
        K3.render([ToolCall("f", {"k": value})])


@pytest.mark.parametrize(
    "text, why",
    [
        (tools(call("f", arg("n", "abc", "number"))), "invalid JSON"),
        (tools(call("f", arg("n", "1", "boolean"))), "typed 'boolean'"),
        (tools(call("f", arg("a", "1"), arg("a", "2"))), "given twice"),
        (tools(f"{O}call index=\"1\"{S}{C}call{S}"), "call block without a tool name"),
        (f"{O}tools{S}" + call("f", arg("a", "1")), "missing <|close|>tools"),
        (tools(call("f", f'{O}argument key="a" type="string"{S}1')), "unclosed parameter value"),
        ("Just prose.", "no <|open|>tools"),
    ],
)
def test_strict_errors(text, why):
    with pytest.raises(formats.FormatError, match=why.replace("|", r"\|")):
        K3.parse_strict(text)


def test_recovery_reads_calls_whose_elements_were_lost():
    text = (f"{O}call tool=\"a\" index=\"1\"{S}" + arg("x", "1", "number")  # no tools channel, no call close
            + f"{O}call tool=\"b\" index=\"2\"{S}" + f'{O}argument key="y" type="string"{S}two'  # value close lost
            + f"{C}call{S}" + call("c", arg("z", "{'k': 1,}", "object"), index=3) + f"{C}tools{S}")
    got = K3.parse_lenient(text)
    assert got.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {"y": "two"}), ToolCall("c", {"z": {"k": 1}})]
    assert {p.code for p in got.problems} >= {"missing_tag", "mended"}
    assert got.cut is None


def test_a_cut_text_says_where_it_stops():
    whole = call("get_weather", arg("city", "Paris"))
    got = K3.parse_lenient(tools(whole) [: -len(f"{C}tools{S}")] + f'{O}call tool="get_weather" index="2"{S}'
                           + f'{O}argument key="city" type="string"{S}To')
    assert got.calls[0] == ToolCall("get_weather", {"city": "Paris"})
    assert got.cut is not None and got.cut.index == 1 and not got.cut.clean and got.cut.arguments == {}
    inside_tag = K3.parse_lenient(f'{O}tools{S}{O}call tool="calc" index="1"')
    assert inside_tag.calls == [] and inside_tag.cut is not None and inside_tag.cut.index is None


def test_the_pipeline_leaves_a_cut_call_out():
    res = Refiner().refine({"upstream": f'{O}tools{S}{O}call tool="f" index="1"{S}' + f'{O}argument key="a" '
                            f'type="string"{S}Par', "finish_reason": "length"})
    assert res["stage"] == "truncated" and res["calls"] == []


def test_text_that_only_quotes_the_tokens_is_no_call():
    for text in (f"Use {O}call to start a call.", f"{O}tools{S}nah uhg{C}tools{S}", f"answer{C}response{S}"):
        assert K3.parse_lenient(text).calls == []
        assert Refiner().refine({"upstream": text})["calls"] == []


def test_answer_parts_take_the_channel_markup_out_of_the_content():
    """The text the user should see, as vLLM's K3 reasoning parser strips it: the response channel's body, no
    channel or turn element; the tools channel is the calls' region (to the end of a text cut inside it)."""
    calls = tools(call("get_time", arg("tz", "CET")))
    for text, content in [
        (f"{O}response{S}On it.{C}response{S}{calls}{C}message{S}", "On it."),
        (f"{O}response{S}{C}response{S}{calls}{C}message{S}", ""),
        (f"On it.{C}response{S}{calls}", "On it."),  # the prompt opened the response channel
        (f"{C}response{S}{O}tools{S}{O}call tool=\"f\" index=\"1\"", ""),  # cut inside the tools channel
        (f"{O}response{S}Paris.{C}response{S}{C}message{S}", "Paris."),  # no call
        (f"Hello!{C}response{S}{C}message{S}", "Hello!"),
    ]:
        parts = K3.answer_parts(text)
        assert (parts.content, parts.reasoning) == (content, None), text
        assert "<|" not in parts.content
    text = f"{O}response{S}On it.{C}response{S}{calls}"
    a, b = K3.answer_parts(text).calls
    assert text[a:b] == calls


def test_a_call_less_answer_and_a_skipped_think_channel_are_read_as_k3():
    """The response channel's elements are weak markers: a call-less answer is this format's (its markup is then
    taken out of the content), and a think channel the prompt opened but the model skipped holds no reasoning."""
    from refiner.formats.reasoning import split_reasoning

    text = f"{O}response{S}Hello world{C}response{S}{C}message{S}"
    assert formats.detect_format(text) == "kimi_k3"
    assert formats.detect_format(f"answer{C}response{S}") == "kimi_k3"
    assert split_reasoning(text, opened=True).reasoning(text) == ""
    thought = f"Plan.{C}think{S}{O}response{S}Hi{C}response{S}"
    assert split_reasoning(thought, opened=True).reasoning(thought) == "Plan."


def _hostile(size: int) -> list[tuple[str, str]]:
    closer_storm = f'{O}argument key="k" type="string"{S}' + f"{C}argument{S}x" * (size // 24)
    arg_storm = f'{O}tools{S}{O}call tool="f" index="1"{S}' + (f'{O}argument key="k" type="object"{S}' + '{"a": "'
                                                               ) * (size // 48)
    call_storm = f'{O}tools{S}' + f'{O}call tool="f" index="1"{S}' * (size // 30)
    attr_storm = f"{O}tools{S}{O}call" + ' a="b"' * (size // 6)
    sep_storm = (O + S + C) * (size // 21)
    return [("closer_storm", f'{O}tools{S}{O}call tool="f"{S}' + closer_storm), ("arg_storm", arg_storm),
            ("call_storm", call_storm), ("attr_storm", attr_storm), ("sep_storm", sep_storm)]


@pytest.mark.parametrize("kind, text", _hostile(formats.MAX_LENIENT_CHARS), ids=[k for k, _ in _hostile(100)])
def test_hostile_texts_are_read_with_bounded_work(kind, text, monkeypatch):
    """Every character of a 200 KB hostile text is decoded as JSON at most once (values are read within their own
    region), and the items read are counted."""
    decoded = []
    real_decode, real_lenient = xml_lenient.JSON_DECODER.decode, xml_lenient.lenient_json

    class Counting:
        def decode(self, s):
            decoded.append(len(s))
            return real_decode(s)

    monkeypatch.setattr(xml_lenient, "JSON_DECODER", Counting())
    monkeypatch.setattr(xml_lenient, "lenient_json", lambda s, **kw: decoded.append(len(s)) or real_lenient(s, **kw))
    got = K3.parse_lenient(text)
    assert sum(decoded) <= 2 * len(text), (kind, sum(decoded))
    assert len(got.calls) <= MAX_RECOVERED_ITEMS
    with pytest.raises(formats.FormatError):
        K3.parse_strict(text)


def test_canitoolcall_k3_fixtures_are_read_as_the_reference_parser_reads_them():
    """canitoolcall's Kimi K3 fixtures (rendered with Moonshot's encoder, engine tests, bug reports), through the
    pipeline with the format auto-detected, judged by canitoolcall's own checks (calls only until the pipeline
    returns content: see tests/family_corpus.py)."""
    pytest.importorskip("canitoolcall")
    import json

    from canitoolcall.fixtures import default_fixtures_dir
    from family_corpus import Row, judge

    root = default_fixtures_dir() / "kimi"
    family = json.loads((root / "family.json").read_text(encoding="utf-8"))
    rows = [Row(f"{p.name}:{n}", rec) for p in sorted(root.glob("*.jsonl"))
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if line.strip()
            for rec in [json.loads(line)] if "x-kimi-k3" in rec["tags"]]
    assert len(rows) >= 20
    refiner = Refiner()
    failed = [(r.id, v.detail) for r in rows if not (v := judge(r, refiner, family)).passed]
    assert not failed, failed


@pytest.mark.parametrize("how", ["upper", "lost >", "brackets"])
def test_k3_control_tokens_written_wrong_are_read(how):
    """K3's control tokens written wrong (and an element name in another case after one) are read as written right,
    and reported; a value holding such a spelling stays the value's text (strictly valid)."""
    fmt = formats.get("kimi_k3")
    calls = [ToolCall("get_weather", {"city": "Paris", "n": 5}), ToolCall("f", {"a": [1]})]
    text = fmt.render(calls)
    spell = {"upper": str.upper, "lost >": lambda t: t[:-1], "brackets": lambda t: "[" + t[1:-1] + "]"}[how]
    for tag in ("<|open|>tools<|sep|>", "<|open|>call", "<|close|>call<|sep|>", "<|close|>tools<|sep|>"):
        if not tag.endswith(">") and how != "upper":
            continue
        damaged = text.replace(tag, spell(tag), 1)
        got = fmt.parse_lenient(damaged)
        assert got.calls == calls, (tag, damaged)
        assert any(p.code == "missing_tag" for p in got.problems)
