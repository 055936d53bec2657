"""The rows added for engines' newer parsers: each names its own text in detection and reads it back."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats.reading import read_upstream
from refiner.pipeline import Refiner
from refiner.specs import load_tools

CALL = ToolCall("lookup_weather", {"town": "Lisbon", "days": 2})


@pytest.mark.parametrize("name", ["qwen25_coder_tools", "pangu", "granite_20b_fc", "hyperclovax_14b",
                                  "zaya_xml", "iquest_q1", "iquest_coder_v2", "gigachat35", "step_audio_2",
                                  "solar_open2", "phi4_mini_tags", "functionary_v31", "multi_format_dsv32",
                                  "glm53_flash", "command_r_plus", "llm_jp_harmony", "rwkv", "step_deepresearch",
                                  "k2_horizon_json", "minicpm3", "cwm", "onyx", "rubra", "llama_cpp_generic",
                                  "functionary_v2", "xing4_0", "react", "qwen_agent",
                                  "openfunctions_v2", "nexusraven", "deepseek_coder_v2"])
def test_a_rendered_call_is_detected_as_its_row(name):
    fmt = formats.get(name)
    text = fmt.render([CALL, CALL])
    assert formats.detect_format(text) == name
    assert fmt.parse_strict(text) == [CALL, CALL]



def test_xing4_0_reads_a_name_glued_spaced_or_broken_from_its_json_and_leaves_the_other_tool_call_rows_alone():
    for sep in ("", " ", "\n"):
        text = f'<tool_call>lookup_weather{sep}{{"town": "Lisbon", "days": 2}}</tool_call>'
        assert formats.detect_format(text) == "xing4_0", sep
        assert formats.get("xing4_0").parse_strict(text) == [CALL]
    others = {'<tool_call>{"name": "lookup_weather", "arguments": {"town": "Lisbon"}}</tool_call>': "hermes",
              '<tool_call>lookup_weather>{"town": "Lisbon"}': "glm53_flash",
              "<tool_call>lookup_weather\n<arg_key>town</arg_key>\n<arg_value>Lisbon</arg_value>\n</tool_call>": "glm45",
              "<tool_call>lookup_weather<param_key>town</param_key><param_value>Lisbon</param_value></tool_call>":
                  "telechat4",
              "<tool_call>\n<function=lookup_weather>\n<parameter=town>\nLisbon\n</parameter>\n</function>\n"
              "</tool_call>": "qwen3_coder"}
    assert {t: formats.detect_format(t) for t in others} == others


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


def test_functionary_v31_claims_a_function_tag_only_when_json_follows_the_name():
    fn = formats.get("functionary_v31")
    text = '<function=lookup_weather>{"town": "Lisbon", "days": 2}</function>'
    assert formats.detect_format(text) == "functionary_v31" and fn.parse_strict(text) == [CALL]
    assert formats.detect_format(text[:-20]) == "functionary_v31"  # cut inside the arguments
    for qwen in ("<function=lookup_weather>\n<parameter=town>\nLisbon\n</parameter>\n</function>",  # <tool_call> lost
                 "<function=lookup_weather>", "<function=lookup_wea", "<function=lookup_weather>\nLisbon"):
        assert formats.detect_format(qwen) == "qwen3_coder"
    qwen = "<tool_call>\n<function=lookup_weather>\n<parameter=town>\nLisbon\n</parameter>\n</function>\n</tool_call>"
    assert formats.detect_format(qwen) == "qwen3_coder"
    with pytest.raises(formats.FormatError):
        fn.parse_strict(qwen)


def test_functionary_v31_reads_the_python_tag_after_its_calls_only():
    fn = formats.get("functionary_v31")
    text = '<function=lookup_weather>{"town": "Lisbon", "days": 2}</function><|python_tag|>x = 2\nprint(x ** 10)'
    calls = [CALL, ToolCall("python", {"code": "x = 2\nprint(x ** 10)"})]
    assert formats.detect_format(text) == "functionary_v31"
    assert fn.parse_strict(text) == calls and fn.parse_lenient(text).calls == calls
    llama_json = '<|python_tag|>{"name": "lookup_weather", "parameters": {"town": "Lisbon"}}'
    for llama in (llama_json, "<|python_tag|>print(2)"):
        assert formats.detect_format(llama) == "llama3_json"
        with pytest.raises(formats.FormatError):
            fn.parse_strict(llama)


def test_multi_format_dsv32_takes_the_typed_parameters_and_leaves_the_rest_to_the_minimax_layout():
    typed = ('<tool_calls>\n<invoke name="lookup_weather">\n<parameter name="town" string="true">Lisbon</parameter>\n'
             '<parameter name="days" string="false">2</parameter>\n</invoke>\n</tool_calls>')
    assert formats.detect_format(typed) == "multi_format_dsv32"
    assert formats.get("multi_format_dsv32").parse_strict(typed) == [CALL]
    assert formats.detect_format(typed[:-40]) == "multi_format_dsv32"  # cut in its last parameter
    with pytest.raises(formats.FormatError):
        formats.get("multi_format_minimax").parse_strict(typed)
    plain = typed.replace(' string="true"', "").replace(' string="false"', "")
    assert formats.detect_format(plain) == "multi_format_minimax"
    assert formats.get("multi_format_minimax").parse_strict(plain) == [CALL]
    bare = '<tool_calls>\n<invoke name="lookup_weather">\n</invoke>\n</tool_calls>'  # no parameters: read alike
    assert formats.detect_format(bare) == "multi_format_minimax"
    assert formats.get("multi_format_dsv32").parse_strict(bare) == [ToolCall("lookup_weather", {})]


def test_glm53_flash_json_calls_stay_apart_from_glm_and_hermes():
    glm = "<tool_call>lookup_weather\n<arg_key>town</arg_key>\n<arg_value>Lisbon</arg_value>\n</tool_call>"
    hermes = '<tool_call>\n{"name": "lookup_weather", "arguments": {"town": "Lisbon"}}\n</tool_call>'
    assert formats.detect_format(glm) == "glm45" and formats.detect_format(hermes) == "hermes"
    cut = '<tool_call>lookup_weather>{"town": "Lisbon", "days": 2}<tool_call>lookup_weather>{"town": "Li'
    assert formats.detect_format(cut) == "glm53_flash"
    got = formats.get("glm53_flash").parse_lenient(cut)
    assert got.calls[0] == CALL and got.cut is not None and got.cut.index == 1


def test_llm_jp_harmony_claims_its_spaced_tokens_and_gpt_oss_stays_harmony():
    gpt_oss = formats.get("harmony").render([CALL, CALL])
    assert formats.detect_format(gpt_oss) == "harmony"
    spaced = ('<|start|> assistant to=functions.lookup_weather<|channel|> commentary <|constrain|>  json<|message|> '
              '{"town": "Lisbon", "days": 2}')
    assert formats.detect_format(spaced) == "llm_jp_harmony"
    assert formats.get("llm_jp_harmony").parse_strict(spaced) == [CALL]


def test_k2_horizon_json_and_xml_layouts_share_their_tags_and_stay_apart():
    xml = ("<ifm|tool_calls><ifm|tool_call>lookup_weather<ifm|arg_key>town</ifm|arg_key><ifm|arg_value>Lisbon"
           "</ifm|arg_value><ifm|arg_key>days</ifm|arg_key><ifm|arg_value>2</ifm|arg_value></ifm|tool_call>"
           "</ifm|tool_calls>")
    assert formats.detect_format(xml) == "k2_horizon" and formats.get("k2_horizon").parse_strict(xml) == [CALL]
    assert formats.detect_format(xml[:-60]) == "k2_horizon"  # cut in a value
    js = ('Checking the forecast.\n<ifm|tool_calls>\n<ifm|tool_call>{"name": "lookup_weather", "arguments": '
          '{"town": "Lisbon", "days": 2}}</ifm|tool_call>\n</ifm|tool_calls>')
    assert formats.detect_format(js) == "k2_horizon_json"
    assert formats.get("k2_horizon_json").parse_strict(js) == [CALL]
    cut = js[: js.index("Lisbon")]
    assert formats.detect_format(cut) == "k2_horizon_json"  # the section's first call decides
    assert formats.get("k2_horizon_json").parse_lenient(cut).cut is not None
    thought = "The user asked for Lisbon.</ifm|think_fast>\n" + js
    assert formats.detect_format(thought) == "k2_horizon_json"
    assert formats.get("k2_horizon_json").parse_strict(thought) == [CALL]


def test_minicpm3_fenced_lines_and_the_lfm2_list_share_a_token_and_stay_apart():
    lfm2 = '<|tool_call_start|>[lookup_weather(town="Lisbon", days=2)]<|tool_call_end|>'
    assert formats.detect_format(lfm2) == "lfm2" and formats.get("lfm2").parse_strict(lfm2) == [CALL]
    fenced = ('<|thought_start|>\nLisbon, two days.\n<|thought_end|>\n<|tool_call_start|>\n```python\n'
              'lookup_weather(town="Lisbon",days=2)\n```\n<|tool_call_end|>\nHere it comes.')
    assert formats.detect_format(fenced) == "minicpm3"
    assert formats.get("minicpm3").parse_strict(fenced) == [CALL]
    with pytest.raises(formats.FormatError):
        formats.get("lfm2").parse_strict(fenced)


def test_cwm_reads_a_json_body_as_the_arguments_and_any_other_body_as_the_command_text():
    cwm = formats.get("cwm")
    shell = ToolCall("bash", {"command": 'grep -rn "x" src\nls'})
    text = "<think>Look first.</think>\n<tool: function>\nbash grep -rn \"x\" src\nls\n</tool>\n" + cwm.render([CALL])
    assert formats.detect_format(text) == "cwm"
    assert cwm.parse_strict(text) == [shell, CALL]
    assert cwm.parse_strict(cwm.render([shell])) == [shell]  # written back as JSON
    assert cwm.parse_lenient("<tool: function>\nbash ls -la").calls == [ToolCall("bash", {"command": "ls -la"})]
    with pytest.raises(formats.FormatError):
        cwm.parse_strict("<tool: function>\nbash\n</tool>")  # a name with no body is no call


def test_granite_pythonic_lines_are_read_when_named_and_detected_as_before():
    text = 'Checking both.\nlookup_weather(town="Lisbon", days=2)\nlookup_weather(town="Lisbon", days=2)'
    fmt = formats.get("granite_pythonic")
    assert fmt.parse_strict(text) == [CALL, CALL] and fmt.render([CALL, CALL]) == "\n".join(text.split("\n")[1:])
    assert formats.detect_format(text) is None and formats.detect_format(text.split("\n", 1)[1]) == "toolace"
    call = text.split("\n")[1]
    parts = fmt.answer_parts(f"Checking both.\n{call}\nThen:\n{call}\nDone.")  # the text around the call lines
    assert parts.content == "Checking both.\nThen:\n\nDone." and parts.calls == (15, 15 + 2 * len(call) + 7)


def test_onyx_reads_its_recipients_and_leaves_a_to_keyword_line_to_the_pythonic_rows():
    onyx = formats.get("onyx")
    note = "to=self<|message|>Look the town up first.<|eom|>"
    assert onyx.parse_strict(note + onyx.render([CALL])) == [CALL]  # a to=self message is text
    assert onyx.parse_lenient("to=user<|message|>Sunny in Lisbon.<|eot|>").calls == []
    assert onyx.answer_parts(onyx.render([CALL])).content == ""  # the recipient is the call's, not content
    # the header harmony writes before a recipient: Onyx's when a JSON object follows a recipient free of harmony's
    headed = "<|start|>assistant " + onyx.render([CALL])
    assert onyx.parse_strict(headed) == [CALL]
    assert formats.detect_format(headed) == "onyx"
    assert formats.detect_format("<|start|>assistant to=functions.get_weather<|message|>{}<|call|>") == "harmony"
    assert formats.detect_format("<|start|>assistant to=user<|message|>Sunny in Lisbon.<|eot|>") == "harmony"
    keyword = 'send_mail(\nto="bob@example.org", subject="hi")'
    assert formats.detect_format(keyword) == "toolace"



def test_the_required_tool_choice_list_is_nestfuls_and_the_tagged_lists_stay_their_rows():
    """SGLang's and vLLM's ``tool_choice="required"`` output, a bare list of ``{"name", "parameters"}``, is read
    strictly by nestful; the single object (a named tool choice in SGLang) stays llama3_json's, and the same list
    after another row's marker stays that row's."""
    listed = '[{"name": "lookup_weather", "parameters": {"town": "Lisbon", "days": 2}}]'
    assert formats.detect_format(listed) == "nestful"
    assert formats.get("nestful").parse_strict(listed) == [CALL]
    assert formats.detect_format(listed[1:-1]) == "llama3_json"
    for marker, row in (("functools", "phi4_mini"), (" -> tool/function_call\n", "hyperclovax_14b"),
                        ("<|tool_call|>", "granite"), ("<func_call>", "xlam")):
        assert formats.detect_format(marker + listed) == row


def test_rubras_opening_word_names_no_call():
    """Rubra's words around a call are plain text: glued to a broken object, the opening word is not read as a tool's
    name; in prose, with no object after it, it opens no call."""
    junk = 'starttoolcall{"name": 7, "arguments": }endtoolcall'
    assert formats.detect_format(junk) == "rubra"
    assert Refiner().refine({"upstream": junk})["calls"] == []
    said = "Rubra writes starttoolcall before a call; nothing is called here."
    assert Refiner().refine({"upstream": said})["calls"] == []
    assert formats.get("rubra").parse_strict(formats.get("rubra").render([CALL, CALL])) == [CALL, CALL]


def test_llama_cpp_generic_reads_its_one_object_and_leaves_the_key_elsewhere_to_others():
    generic = formats.get("llama_cpp_generic")
    one = generic.render([CALL])
    assert one.startswith('{"tool_call": ') and generic.parse_strict(one) == [CALL]
    assert formats.detect_format("<think>Look it up.</think>\n" + one) == "llama_cpp_generic"
    answer = '{"response": "Sunny in Lisbon, 21 °C."}'
    assert formats.detect_format(answer) == "llama_cpp_generic" and generic.parse_strict(answer) == []
    assert generic.answer_parts(answer).content == "Sunny in Lisbon, 21 °C."  # a response is the content
    assert generic.answer_parts(one).content == ""
    assert generic.answer_parts(f"Well: {answer} Bye.").content == "Well: Sunny in Lisbon, 21 °C. Bye."
    # the key inside another format's arguments is not this row's, nor an object holding other keys too
    nested = '{"name": "lookup_weather", "arguments": {"tool_call": 1}}'
    assert formats.detect_format(nested) == "llama3_json"
    with pytest.raises(formats.FormatError):
        generic.parse_strict('{"response": "Hi.", "tool_call": {"name": "f", "arguments": {}}}')
    bare_list = '{"tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}'
    assert formats.detect_format(bare_list) == "openai"  # OpenAI's calls stay OpenAI's



def test_functionary_v2_reads_its_recipients_and_a_message_to_all_is_text():
    v2 = formats.get("functionary_v2")
    note = "<|from|>assistant\n<|recipient|>all\n<|content|>Looking it up.\n"
    assert formats.detect_format(note + v2.render([CALL])) == "functionary_v2"
    assert v2.parse_strict(note + v2.render([CALL]) + "<|stop|>") == [CALL]
    assert v2.parse_lenient(v2.render([CALL]).replace("<|content|>", "<|CONTENT|>")).calls == [CALL]
    assert Refiner().refine({"upstream": note.replace("Looking it up.", "Dry in Lisbon.")})["calls"] == []


def test_react_reads_an_action_after_its_thought_and_leaves_the_answer_as_text():
    """ReAct's Action line starts no tag: found at a line start after prose, cut inside the arguments too; a Final
    Answer (no Action) and an Observation after the call are text."""
    call = formats.get("react").render([CALL])
    assert formats.detect_format("Thought: the town's forecast first.\n" + call) == "react"
    assert formats.detect_format("Thought: the town's forecast first.\n" + call[:-12]) == "react"
    assert formats.detect_format(call[:-12]) == "react"
    assert formats.get("react").parse_strict(call + "\nObservation: 18 °C, dry") == [CALL]
    said = "Thought: I know this one.\nFinal Answer: Lisbon stays dry through Sunday."
    assert Refiner().refine({"upstream": said})["calls"] == []


def test_qwen_agent_reads_its_function_lines_and_leaves_the_result_and_reply_as_text():
    qwen = formats.get("qwen_agent")
    text = "Let me look.\n" + qwen.render([CALL, CALL]) + "\n✿RESULT✿: 18 °C\n✿RETURN✿: Dry and mild in Lisbon."
    assert formats.detect_format(text) == "qwen_agent" and qwen.parse_strict(text) == [CALL, CALL]
    assert Refiner().refine({"upstream": "✿RETURN✿: Dry and mild in Lisbon."})["calls"] == []


LOOKUP = load_tools([{"type": "function", "function": {"name": "lookup_weather", "parameters": {
    "type": "object", "properties": {"town": {"type": "string"}, "days": {"type": "integer"}}}}}])
ARGS = '{"town": "Lisbon", "days": 2}'


@pytest.mark.parametrize(("fmt", "text"), [
    ("react", f"Thought: the town's forecast first.\nACTI_ON: lookup_weather\nAction Input: {ARGS}"),
    ("react", f"lookup_weather\nAction Input: {ARGS}"),
    ("react", f"<|python_start|>lookup_weather\nAction Input: {ARGS}"),
    ("react", f"Action: lookup_weather<|call_args|>{ARGS}"),
    ("qwen_agent", f"✿Func-tion✿: lookup_weather\n✿ARGS✿: {ARGS}"),
    ("qwen_agent", f"Checking the town.\n```\nlookup_weather\n✿ARGS✿: {ARGS}"),
    ("qwen_agent", f"✿FUNCTION✿: lookup_weather[ARGUMENTS]{ARGS}"),
])
def test_a_label_row_reads_a_call_whose_label_is_written_wrong_lost_or_swapped(fmt, text):
    """A call label written wrong is respelt (and salvage sees the row's labels, so the reading stands); a lost call
    label leaves the tool's name alone on the line before the name label; a name label swapped for another format's
    token leaves NAME<token>{...}."""
    assert read_upstream(text, fmt, LOOKUP).calls == [CALL]


@pytest.mark.parametrize(("fmt", "text"), [
    ("react", f"I will look the town up now\nAction Input: {ARGS}"),
    ("react", f"forecast\nAction Input: {ARGS}"),
    ("qwen_agent", f"Sure.\n✿ARGS✿: {ARGS}"),
    ("qwen_agent", f"lookup_weather is the tool\n✿ARGS✿: {ARGS}"),
])
def test_a_label_row_reads_no_call_from_prose_before_its_name_label(fmt, text):
    """The line before a name label whose call label is lost names a call only when it is an offered tool's name
    alone."""
    assert read_upstream(text, fmt, LOOKUP).calls == []


def test_openfunctions_v2_reads_each_call_after_its_delimiter_and_the_lines_after_them_as_text():
    text = ("<<function>>lookup_weather(town='Lisbon', days=2)<<function>>lookup_weather(town=\"Lisbon\", days=2)"
            "\nBoth are on their way.")
    fmt = formats.get("openfunctions_v2")
    assert formats.detect_format(text) == "openfunctions_v2" and fmt.parse_strict(text) == [CALL, CALL]
    assert fmt.answer_parts(text).content.strip() == "Both are on their way."
    quoted = "<<function>>lookup_weather(town='Lis<<function>>bon', days=2)"  # the delimiter inside a string is text
    assert fmt.parse_strict(quoted) == [ToolCall("lookup_weather", {"town": "Lis<<function>>bon", "days": 2})]
    with pytest.raises(formats.FormatError):  # a string left open is not closed by the next call's quotes
        fmt.parse_strict("<<function>>lookup_weather(town='Lisbon<<function>>lookup_weather(town='Porto')")


def test_nexusraven_reads_its_call_line_leaves_the_thought_as_text_and_never_guesses_a_nested_call():
    fmt = formats.get("nexusraven")
    for end in ("<bot_end>\nThought: Lisbon, two days; done.", " \nThought: Lisbon, two days; done.", "; <bot_end>"):
        text = "Call: lookup_weather(town='Lisbon', days=2); lookup_weather(town='Lisbon', days=2)" + end
        assert formats.detect_format(text) == "nexusraven" and fmt.parse_strict(text) == [CALL, CALL]
    assert fmt.answer_parts(text.replace("; <bot_end>", "<bot_end>\nThought: ok")).content.strip() == "Thought: ok"
    assert formats.detect_format("Call: 555 0134 for the front desk.") is None  # the word in prose, no call after it
    nested = "Call: lookup_weather(town=city_of(airport='LIS'), days=2)<bot_end>"
    with pytest.raises(formats.FormatError, match="a call to city_of as a value"):
        fmt.parse_strict(nested)
    got = fmt.parse_lenient(nested)
    assert got.calls == [ToolCall("lookup_weather", {"days": 2})]
    assert [p.code for p in got.problems] == ["strict", "bad_argument"]


def test_nexusraven_reads_its_call_label_written_otherwise_and_never_takes_a_tool_name_for_it():
    fmt = formats.get("nexusraven")
    other = ToolCall("lookup_weather", {"town": "Porto", "days": 1})
    for label in ("CALL: ", "Cal_l: ", "call : ", "C-a-l-l:"):
        text = label + "lookup_weather(town='Lisbon', days=2); lookup_weather(town='Porto', days=1)<bot_end>"
        got = fmt.parse_lenient(text)
        assert got.calls == [CALL, other], label  # the first call (the label's line) is read too
        assert "missing_tag" in [p.code for p in got.problems]
    # with no label, a tool whose name starts with the label's word is a call, not a misspelt label
    named = [ToolCall("call_back", {"n": 1}), ToolCall("calllog", {})]
    assert fmt.parse_lenient("call_back(n=1); calllog()<bot_end>").calls == named


def test_deepseek_coder_v2_reads_its_python_block_and_leaves_deepseek_v3_json_blocks_to_v3():
    head = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>lookup_weather\n"
    tail = "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    fmt = formats.get("deepseek_coder_v2")
    text = head + "```python\nlookup_weather(town='Lisbon', days=2)" + tail
    assert formats.detect_format(text) == "deepseek_coder_v2" and fmt.parse_strict(text) == [CALL]
    json_block = head + '```json\n{"town": "Lisbon", "days": 2, "note": "```python\\nx()"}' + tail
    assert formats.detect_format(json_block) == "deepseek_v3"  # a fence word inside a JSON string is no python block
    tools = [{"type": "function", "function": {"name": "lookup_weather", "parameters": {"type": "object", "properties": {
        "town": {"type": "string"}, "days": {"type": "integer"}}}}}]
    positional = head + "```python\nlookup_weather('Lisbon', 2)" + tail
    with pytest.raises(formats.FormatError, match="positional arguments"):
        fmt.parse_strict(positional)
    got = Refiner().refine({"upstream": positional, "tools": tools})["calls"]  # placed on the declared parameters
    assert [(c["name"], c["arguments"]) for c in got] == [(CALL.name, dict(CALL.arguments))]
    got = fmt.parse_lenient(head + "```python\nweather(town='Lisbon', days=2)" + tail)
    assert got.calls == [CALL] and "bad_name" in [p.code for p in got.problems]
