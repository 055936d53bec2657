"""gpt-oss harmony tool calls (refiner/formats/harmony.py): message headers in every order the model writes them,
reasoning and preambles skipped, a dropped stop token, errors, and recovery (also of text whose special tokens were
dropped by the decoder)."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import FormatError, harmony
from refiner.pipeline import Refiner

H = formats.get("harmony")
ANALYSIS = "<|channel|>analysis<|message|>Need the weather.<|end|>"
CALL = '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>'
PARIS = ToolCall("get_weather", {"city": "Paris"})


def test_render_is_the_chat_templates_text():
    """The row writes the header as gpt-oss's chat template does (the first message's <|start|>assistant is the
    prompt's); the guide's spelling writes the guide's header. Both read back."""
    calls = [PARIS, ToolCall("t", {})]
    assert H.render(calls) == (
        ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>'
        "<|start|>assistant to=functions.t<|channel|>commentary json<|message|>{}<|call|>"
    )
    guide = type(H)()
    guide.spelling = harmony.GUIDE
    assert guide.render(calls) == (
        '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}'
        "<|call|><|start|>assistant<|channel|>commentary to=functions.t <|constrain|>json<|message|>{}<|call|>"
    )
    for text in (H.render(calls), guide.render(calls)):
        assert H.parse_strict(text) == calls
        assert formats.detect_format(text) == "harmony"


@pytest.mark.parametrize(
    "text",
    [
        ANALYSIS + CALL,  # a raw completion: the prompt ended with <|start|>assistant
        "<|start|>assistant" + ANALYSIS + CALL,  # the whole turn
        CALL.removeprefix("<|start|>assistant"),  # calls at once
        ANALYSIS + CALL.replace(" <|constrain|>json", " json"),  # content type without <|constrain|>
        ANALYSIS + CALL.replace(" <|constrain|>json", ""),  # no content type
        ANALYSIS + '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Paris"}<|call|>',
        'to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
        ANALYSIS + CALL.removesuffix("<|call|>"),  # the stop token dropped by the decoder
        ANALYSIS + "<|start|>assistant<|channel|>commentary<|message|>Checking now.<|end|>" + CALL,  # a preamble first
        "<think>x</think>Sure [1] {x}:\n" + ANALYSIS + CALL + "\nDone [ok].",  # prose around the messages
    ],
)
def test_the_header_variants_read_the_same_call(text):
    assert H.parse_strict(text) == [PARIS]
    assert formats.detect_format(text) == "harmony"


def test_several_calls_and_a_final_answer_after_them():
    text = ANALYSIS + CALL + CALL.replace("Paris", "Rome") + "<|start|>assistant<|channel|>final<|message|>Done.<|return|>"
    assert H.parse_strict(text) == [PARIS, ToolCall("get_weather", {"city": "Rome"})]


def test_tokens_inside_the_json_are_text():
    call = ToolCall("post", {"text": "<|call|><|start|>assistant<|channel|>final<|message|>x<|end|>"})
    assert H.parse_strict(H.render([call])) == [call]


@pytest.mark.parametrize("name", ["harmony", "llm_jp_harmony"])
def test_a_token_look_alike_that_is_a_whole_string_value_stays_text_when_the_text_is_cut(name):
    """A value written like a token without its brackets ("|START|"), in a text cut after the call: the lenient
    reader respells look-alikes of the tokens, but not a whole quoted string."""
    fmt = formats.get(name)
    call = ToolCall("get_weather", {"city": "|START|"})
    text = fmt.render([call, ToolCall("get_weather", {})])
    cut = text[: text.rindex("<|start|>") + len("<|start|>")]
    assert fmt.parse_lenient(cut).calls == [call]
    assert Refiner().refine({"upstream": cut, "format": name, "finish_reason": "length"})["calls"] == [
        {"name": "get_weather", "arguments": {"city": "|START|"}}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (ANALYSIS + "<|start|>assistant<|channel|>final<|message|>Paris is sunny.<|return|>", "no message addressed"),
        ('<|channel|>commentary to=browser.search <|constrain|>json<|message|>{"query":"x"}<|call|>', "not a function"),
        ('<|channel|>commentary to=functions.f <|constrain|>text<|message|>{"a":1}<|call|>', "not json"),
        ('<|channel|>commentary to=functions.f json<|message|>[1]<|call|>', "must be a JSON object"),
        ('<|channel|>commentary to=functions.f json<|message|>{"a":1}<|end|>', "expected <\\|call\\|>"),
        ('<|channel|>chat to=functions.f<|message|>{}<|call|>', "unknown channel"),
        ('<|start|>user<|channel|>commentary to=functions.f<|message|>{}<|call|>', "not the assistant"),
        (CALL + " junk " + CALL, "text between harmony messages"),
        ("no harmony here", "no harmony message"),
    ],
)
def test_strict_errors(text, message):
    with pytest.raises(FormatError, match=message):
        H.parse_strict(text)


def test_recovery():
    cut = H.parse_lenient(ANALYSIS + CALL + '<|start|>assistant<|channel|>commentary to=functions.b json<|message|>{"x": "ab')
    assert cut.calls == [PARIS, ToolCall("b", {"x": "ab"})] and "unclosed" in {p.code for p in cut.problems}
    in_name = H.parse_lenient(ANALYSIS + CALL + "<|start|>assistant<|channel|>commentary to=functions.get_wea")
    assert in_name.calls == [PARIS]
    no_message = H.parse_lenient(ANALYSIS + CALL.replace("<|message|>", ""))
    assert no_message.calls == [PARIS] and no_message.problems
    stripped = H.parse_lenient('analysisNeed weather.assistantcommentary to=functions.get_weather json{"city":"Paris"}')
    assert stripped.calls == [PARIS]
    assert formats.detect_format('analysisx.assistantcommentary to=functions.get_weather json{"city":"Paris"}') == "harmony"
    wrong_end = H.parse_lenient(ANALYSIS + CALL.replace("<|call|>", "<|end|>"))
    assert wrong_end.calls == [PARIS] and "missing_tag" in {p.code for p in wrong_end.problems}
    final_only = H.parse_lenient(ANALYSIS + "<|start|>assistant<|channel|>final<|message|>Hi.<|return|>")
    assert final_only.calls == [] and final_only.problems


def test_render_refuses_names_the_recipient_cannot_hold():
    for name in ("get weather", "a<b", ""):
        with pytest.raises(formats.RenderError):
            H.render([ToolCall(name, {})])


def test_hostile_inputs_give_problems_not_errors():
    for text in ["<|channel|>" * 15_000, "to=functions." * 14_000, ("to=functions.a<|message|>{" * 7_000),
                 "<|start|>assistant<|channel|>analysis<|message|>x<|end|>" * 3_500, "<|message|>" * 15_000]:
        got = H.parse_lenient(text)
        assert not [p for p in got.problems if p.code == "internal"]
        assert got.ok == H.is_valid(text)


def test_misspelt_tokens_and_a_recipient_without_its_equals_sign():
    want = [ToolCall("get_weather", {"city": "Paris"})]
    head = "<|start|>assistant<|channel|>commentary "
    for end in ("[|call|]", "<|CALL|>", "<|call|"):
        got = H.parse_lenient(f'{head}to=functions.get_weather <|constrain|>json<|message|>{{"city": "Paris"}}{end}')
        assert got.calls == want and got.cut is None, end
    for to in ("tofunctions.", "to functions.", "to:functions."):
        got = H.parse_lenient(f'{head}{to}get_weather <|constrain|>json<|message|>{{"city": "Paris"}}<|call|>')
        assert got.calls == want, to
    # "to functions." inside the arguments is text
    text = f'{head}to=functions.say <|constrain|>json<|message|>{{"text": "go to functions.x"}}'
    assert H.parse_lenient(text + "[|call|]").calls == [ToolCall("say", {"text": "go to functions.x"})]


# A completion cut by its token limit inside a call's header, written as the harmony guide and vLLM's / SGLang's
# parsers show it: the recipient in the role part or after the channel, then the channel, then the content type.
@pytest.mark.parametrize(
    "tail",
    [
        "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json",
        "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constr",
        "<|start|>assistant to=functions.get_weather<|channel|>comm",
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json",
        "<|start|>assistant<|channel|>commentary to=functions.get_weather json",
    ],
)
def test_a_cut_inside_the_header_is_a_cut_not_a_call(tail):
    got = H.parse_lenient(ANALYSIS + tail)
    assert got.calls == []
    assert got.cut is not None and got.cut.index is None and not got.cut.clean
    assert any(p.code == "truncated" and "header" in p.message for p in got.problems)
    # a call written whole before the cut stays
    assert H.parse_lenient(ANALYSIS + CALL + tail).calls == [PARIS]


def test_a_cut_after_the_header_keeps_the_call_marked_as_cut():
    got = H.parse_lenient(ANALYSIS + CALL.removesuffix('{"city":"Paris"}<|call|>') + '{"city": "Par')
    assert got.calls == [ToolCall("get_weather", {"city": "Par"})] and got.cut.index == 0 and not got.cut.clean


def test_a_role_header_recipient_is_read_after_a_preamble_and_between_calls():
    role = '<|start|>assistant to=functions.{}<|channel|>commentary json<|message|>{}<|call|>'
    text = (ANALYSIS + "<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>"
            + role.format("get_weather", '{"city":"Paris"}') + role.format("get_time", '{"tz":"CET"}'))
    want = [PARIS, ToolCall("get_time", {"tz": "CET"})]
    assert H.parse_strict(text) == want
    assert H.parse_lenient(text.replace("<|call|>", "", 1)).calls == want  # a stop token lost between them


def test_the_final_channel_is_the_answer_even_when_it_holds_json():
    final = '<|start|>assistant<|channel|>final<|message|>{"name": "get_weather", "arguments": {"city": "Paris"}}'
    spans = H.answer_spans(ANALYSIS + final, 0)
    assert len(spans) == 1 and (ANALYSIS + final)[spans[0][0] :].startswith("<|channel|>final")
    # a final channel addressed to a function (the model put its call there) is not the answer
    assert H.answer_spans('<|channel|>final to=functions.f json<|message|>{"a": 1}<|call|>', 0) == []
    assert H.answer_spans('<|start|>assistant to=functions.f<|channel|>final<|message|>{"a": 1}<|call|>', 0) == []


def test_through_the_pipeline_a_header_cut_and_a_final_json_answer_give_no_call():
    from refiner.pipeline import Refiner

    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    cut = ANALYSIS + "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json"
    for finish in (None, "length"):
        res = Refiner().refine({"upstream": cut, "tools": tools, "finish_reason": finish})
        assert res["calls"] == [] and res["stage"] == "truncated", finish
    final = ANALYSIS + '<|start|>assistant<|channel|>final<|message|>{"name": "get_weather", "arguments": {"city": "Paris"}}'
    res = Refiner().refine({"upstream": final, "tools": tools})
    assert res["calls"] == [] and "no_calls" in {d["code"] for d in res["diagnostics"]}


@pytest.mark.parametrize(
    "text",
    [
        'to=functions.get_weathercommentary json<|message|>{"city":"Paris"}<|call|>',  # <|channel|> lost
        'to=functions.get_weathercommentary json{"city":"Paris"}',  # every special token lost
        ' tofunctions.get_weather<|channel|>commentary json<|message|>{"city":"Paris"}<|call|>',  # the "=" lost
    ],
)
def test_the_templates_header_with_a_token_or_the_equals_sign_lost(text):
    got = H.parse_lenient(text)
    assert got.calls == [PARIS] and got.problems
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    res = Refiner().refine({"tools": tools, "upstream": text, "format": "harmony"})
    assert [(c["name"], c["arguments"]) for c in res["calls"]] == [("get_weather", {"city": "Paris"})]


def test_a_channel_name_ending_a_tool_name_is_kept_when_the_header_has_its_channel():
    call = ToolCall("add_commentary", {"text": "ok"})
    guide = type(H)()
    guide.spelling = harmony.GUIDE
    for text in (H.render([call]), guide.render([call]), guide.render([call]).replace("<|constrain|>", "")):
        assert H.parse_lenient(text).calls == [call]
