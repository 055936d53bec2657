"""The XML parameter grammar (refiner/formats/xml_grammar.py) and its rows: real DeepSeek DSML outputs from
canitoolcall, each row's spelling (typing attribute, self-closing invoke, reasoning blocks, tag suffixes, attribute
names), detection among rows sharing tags, a row made at run time, and the issue-20 bugs found with outputs nobody
here wrote."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall, canonical_json
from refiner.formats import FormatError
from refiner.formats.catalog import rows_of
from refiner.formats.family import EXAMPLE_CALLS, Family, make_row
from refiner.formats.xml_grammar import XmlParams
from refiner.formats.xml_spelling import XmlSpelling
from refiner.pipeline import Refiner

ROWS = [(row.family, row.spelling) for row in rows_of(XmlParams)]

ROW_NAMES = [fam.name for fam, _ in ROWS]


def tool(name: str, **props: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {k: {"type": t} for k, t in props.items()}}}}


def refined(text: str, tools: list | None = None) -> list[dict]:
    req = {"upstream": text} if tools is None else {"upstream": text, "tools": tools}
    return [{"name": c["name"], "arguments": c["arguments"]} for c in Refiner().refine(req)["calls"]]


# ----------------------------------------------------------------------------------------------------------------
# Rows


def test_every_row_is_registered_with_its_spelling_and_renders_its_example():
    for fam, spelling in ROWS:
        fmt = formats.get(fam.name)
        assert isinstance(fmt, XmlParams) and fmt.spelling is spelling and fmt.row is fam
        assert fmt.reasoning == fam.reasoning and fmt.tags == spelling.tags()
        assert fmt.parse_strict(fmt.example) == list(EXAMPLE_CALLS), fam.name
        assert formats.detect_format(fmt.example) == fam.name
        assert fam.sources, fam.name


def test_a_spelling_that_contradicts_itself_is_refused():
    with pytest.raises(ValueError, match="value_open"):
        XmlSpelling(call_open="<f=", call_close="</f>", key_at="element")
    with pytest.raises(ValueError, match="typing"):
        XmlSpelling(call_open="<f=", call_close="</f>", typing="attr")
    with pytest.raises(ValueError, match="section"):
        XmlSpelling(call_open="<f=", call_close="</f>", section_open="<calls>")


def test_a_row_made_at_run_time_reads_and_writes_its_dialect():
    """What ``formats derive`` yields from a chat template: a row that no registry knows, read by the same grammar."""
    spelling = XmlSpelling(section_open="<acme:calls>", section_close="</acme:calls>", call_open="<acme:call ",
                           call_close="</acme:call>", name_at="attr", key_open="<acme:arg ", value_close="</acme:arg>",
                           key_at="attr")
    fmt = make_row(XmlParams, Family("acme", "a derived dialect"), spelling, 9_999)()
    text = '<acme:calls>\n<acme:call name="f">\n<acme:arg name="n">3</acme:arg>\n<acme:arg name="s">x y</acme:arg>\n' \
           "</acme:call>\n</acme:calls>"
    assert fmt.parse_strict(text) == [ToolCall("f", {"n": 3, "s": "x y"})]
    assert fmt.parse_strict(fmt.render(list(EXAMPLE_CALLS))) == list(EXAMPLE_CALLS)
    assert "acme" not in formats.names()


# ----------------------------------------------------------------------------------------------------------------
# DeepSeek DSML: canitoolcall's real fixtures (renders of the official encoder, engine tests)


def _dsml_fixtures():
    fixtures = pytest.importorskip("canitoolcall.fixtures")
    rows = [fx for fx in fixtures.load_fixtures(families=["deepseek"]) if "DSML" in fx.raw_output]
    assert len(rows) >= 40
    return rows


_VARIANT = {"x-deepseek-v32": "deepseek_v32", "x-deepseek-v4": "deepseek_v4", "x-deepseek-v41": "deepseek_v41"}


def test_canitoolcall_dsml_fixtures_are_read_as_the_reference_parser_reads_them():
    bad = []
    for fx in _dsml_fixtures():
        got = refined(fx.raw_output, list(fx.tools))
        want = [] if fx.expected is None else [{"name": c.name, "arguments": dict(c.arguments)}
                                               for c in fx.expected.tool_calls]
        if canonical_json(got) != canonical_json(want):
            bad.append((fx.id, got, want))
        variant = next((_VARIANT[t] for t in fx.tags if t in _VARIANT), None)
        if variant is not None and fx.expected is not None:
            assert formats.detect_format(fx.raw_output) == variant, fx.id
    assert not bad, bad


def test_dsml_string_attribute_types_the_value():
    fmt = formats.get("deepseek_v32")
    o, c = "<｜DSML｜", "</｜DSML｜"
    text = (f'{o}function_calls>\n{o}invoke name="f">\n{o}parameter name="code" string="true">007{c}parameter>\n'
            f'{o}parameter name="pad" string="true">  x\n{c}parameter>\n'
            f'{o}parameter name="n" string="false">1e-05{c}parameter>\n'
            f'{o}parameter name="o" string="false">{{"a": [true, null]}}{c}parameter>\n{c}invoke>\n{c}function_calls>')
    assert fmt.parse_strict(text) == [ToolCall("f", {"code": "007", "pad": "  x\n", "n": 1e-05,
                                                     "o": {"a": [True, None]}})]
    with pytest.raises(FormatError, match="string= must be"):
        fmt.parse_strict(text.replace('string="true">007', 'string="yes">007'))


def test_dsml_writes_a_string_holding_its_own_tags_as_json_and_reads_it_back():
    fmt = formats.get("deepseek_v4")
    for value in ["</｜DSML｜parameter>", "a\n<｜DSML｜parameter name=\"x\" string=\"true\">b", "</｜DSML｜invoke>"]:
        call = ToolCall("f", {"v": value, "w": 1})
        text = fmt.render([call])
        # a parameter's own tags cannot stand raw in a value; a call's closer can (the parameter's closer follows)
        assert ('name="v" string="false"' in text) == ("parameter" in value)
        assert fmt.parse_strict(text) == [call]


def test_a_self_closing_invoke_is_a_call_without_arguments():
    text = '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="submit"/>\n</｜DSML｜tool_calls>'
    assert formats.detect_format(text) == "deepseek_v4"
    assert formats.get("deepseek_v4").parse_strict(text) == [ToolCall("submit", {})]
    assert formats.get("deepseek_v4").parse_lenient(text[:-5]).calls == [ToolCall("submit", {})]


# ----------------------------------------------------------------------------------------------------------------
# Other rows' spellings


def test_attribute_names_with_quotes_and_brackets_round_trip():
    for name in ("minimax_m2", "deepseek_v32", "minicpm5"):
        fmt = formats.get(name)
        call = ToolCall("f", {'a "quoted" <key> & more\nlines': "v", "plain": 2})
        assert fmt.parse_strict(fmt.render([call])) == [call], name


def test_seed_oss_reasoning_block_is_not_read_for_calls_and_calls_are_written_back_in_seed():
    seed = formats.get("seed_oss")
    call = "<seed:tool_call>\n<function=get_weather>\n<parameter=city>{}</parameter>\n</function>\n</seed:tool_call>"
    text = f"<seed:think>Maybe {call.format('Kyoto')}? No.</seed:think>\n{call.format('Osaka')}"
    assert formats.detect_format(text) == "seed_oss"
    assert seed.parse_strict(text) == [ToolCall("get_weather", {"city": "Osaka"})]
    rendered = seed.render([ToolCall("get_weather", {"city": "Osaka", "hourly": True})])
    assert rendered.startswith("<seed:tool_call>\n<function=get_weather>") and "<parameter=hourly>True</parameter>" in rendered
    assert formats.detect_format(rendered) == "seed_oss"
    assert refined(text) == [{"name": "get_weather", "arguments": {"city": "Osaka"}}]


def test_hunyuan_v4_reads_any_checkpoint_suffix_and_v3_needs_its_tool_sep():
    v4 = formats.get("hunyuan_v4")
    for sfx in (":6124c78e", ":opensource", ":0f0f"):
        text = (f"<tool_calls{sfx}><tool_call{sfx}>get_time</tool_call{sfx}><tool_call{sfx}>f<arg_key{sfx}>n"
                f"</arg_key{sfx}><arg_value{sfx}>2</arg_value{sfx}></tool_call{sfx}></tool_calls{sfx}>")
        assert formats.detect_format(text) == "hunyuan_v4", sfx
        assert v4.parse_strict(text) == [ToolCall("get_time", {}), ToolCall("f", {"n": 2})]
    assert ":6124c78e>" in v4.render([ToolCall("f", {"a": 1})])
    sfx = ":6124c78e"  # the reasoning block carries the suffix too: a call drafted in it is not read
    draft = f"<tool_calls{sfx}><tool_call{sfx}>draft</tool_call{sfx}></tool_calls{sfx}>"
    text = f"<think{sfx}>plan {draft}</think{sfx}>\n" + draft.replace("draft", "get_time")
    assert v4.parse_strict(text) == [ToolCall("get_time", {})]
    # GLM-4.7 writes the name and the first key with nothing between: not Hunyuan's (no <tool_sep>)
    glm47 = "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
    assert formats.detect_format(glm47) == "glm45"
    hy3 = "<tool_calls><tool_call>get_weather<tool_sep><arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call></tool_calls>"
    assert formats.detect_format(hy3) == "hunyuan_v3"
    assert formats.get("hunyuan_v3").parse_strict(hy3) == [ToolCall("get_weather", {"city": "Paris"})]


def test_k2_horizon_typed_layout_is_read_by_recovery_with_its_types():
    """K2-Horizon's ``xml_typed`` layout (vLLM's k2_horizon parser, ``tool_call_format="xml_typed"``) writes a type
    element between each key and value: ``string`` keeps the text, another type is JSON, ``any`` the row's typing;
    the default ``xml`` layout's strict reading refuses it, as vLLM's parser does for that layout."""
    def arg(k, t, v):
        return f"<ifm|arg_key>{k}</ifm|arg_key><ifm|arg_type>{t}</ifm|arg_type><ifm|arg_value>{v}</ifm|arg_value>"
    text = ("<ifm|tool_calls><ifm|tool_call>f" + arg("zip", "string", "02139") + arg("code", "string", "42")
            + arg("n", "integer", "7") + arg("tags", "array[string]", '["a", "b"]') + arg("x", "any", "true")
            + "</ifm|tool_call></ifm|tool_calls>")
    k2 = formats.get("k2_horizon")
    assert formats.detect_format(text) == "k2_horizon"
    with pytest.raises(FormatError):
        k2.parse_strict(text)
    assert k2.parse_lenient(text).calls == [
        ToolCall("f", {"zip": "02139", "code": "42", "n": 7, "tags": ["a", "b"], "x": True})]
    assert refined(text) == [{"name": "f", "arguments": {"zip": "02139", "code": "42", "n": 7, "tags": ["a", "b"],
                                                         "x": True}}]
    with pytest.raises(ValueError, match="type element"):
        XmlSpelling(call_open="<f=", call_close="</f>", type_open="<t>", type_close="</t>")


def test_rows_sharing_tags_are_told_apart():
    minimax = '<minimax:tool_call>\n<invoke name="f">\n<parameter name="k">v</parameter>\n</invoke>\n</minimax:tool_call>'
    dots = minimax.replace("minimax:tool_call", "dots_function_call")
    assert formats.detect_format(minimax) == "minimax_m2" and formats.detect_format(dots) == "dots1"
    json_minimax = '<tool_calls>\n{"name": "f", "arguments": {"k": "v"}}\n</tool_calls>'
    assert formats.detect_format(json_minimax) == "minimax"  # MiniMax-01's JSON, not Hunyuan's XML
    qwen = "<tool_call>\n<function=f>\n<parameter=k>\nv\n</parameter>\n</function>\n</tool_call>"
    assert formats.detect_format(qwen) == "qwen3_coder"
    assert formats.detect_format(qwen.replace("tool_call>", "seed:tool_call>")) == "seed_oss"
    assert formats.detect_format('<function=f>{"k": "v"}</function>') == "functionary_v31"  # JSON after the name


@pytest.mark.parametrize("name", ROW_NAMES)
def test_a_value_holding_the_rows_own_closers_reads_back(name):
    """Issue 20: a value holding the format's own closer (``</parameter>``, ``</arg_value>``, the call's and the
    section's). Raw-text XML cannot tell such a value from the end of the parameter, so ``render`` writes it as a JSON
    string literal (typed rows: ``string="false"``), which reads back as the value. A row whose type attribute
    names the value's type (Kimi K3) has no JSON string: it writes the value raw when it reads back so, else refuses."""
    fmt = formats.get(name)
    s = fmt.spelling
    for closer in {s.value_close, s.call_close, s.section_close or s.call_close, s.value_close + "\n" + s.key_open}:
        call = ToolCall("write_file", {"content": f"before {closer} after", "n": 1})
        try:
            text = fmt.render([call])
        except formats.RenderError:
            assert s.typing == "named", (name, closer)
            continue
        assert fmt.parse_strict(text) == [call], (name, closer)
        assert fmt.parse_lenient(text).calls == [call], (name, closer)


# ----------------------------------------------------------------------------------------------------------------
# Issue 20 item 4: bugs found with outputs nobody here wrote


def test_qwen3_coder_string_true_stays_true_and_boolean_true_is_true():
    text = ("<tool_call>\n<function=lookup>\n<parameter=flag>\ntrue\n</parameter>\n<parameter=on>\ntrue\n"
            "</parameter>\n<parameter=off>\nFalse\n</parameter>\n</function>\n</tool_call>")
    tools = [tool("lookup", flag="string", on="boolean", off="boolean")]
    assert refined(text, tools) == [{"name": "lookup", "arguments": {"flag": "true", "on": True, "off": False}}]
    q = formats.get("qwen3_coder")
    assert q.parse_strict(text)[0].arguments["flag"] == "true"  # no spec: the text as written, never "True"
    call = ToolCall("f", {"s": "true", "b": True, "t": "True"})
    assert q.parse_strict(q.render([call])) == [call]


def test_qwen3_coder_first_call_missing_its_opening_tag_is_kept():
    text = ("<function=first>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>\n"
            "<tool_call>\n<function=second>\n<parameter=a>\n2\n</parameter>\n</function>\n</tool_call>")
    q = formats.get("qwen3_coder")
    with pytest.raises(FormatError, match="missing <tool_call> before call #1"):
        q.parse_strict(text)
    got = q.parse_lenient(text)
    assert got.calls == [ToolCall("first", {"a": 1}), ToolCall("second", {"a": 2})]
    assert any(p.code == "missing_tag" for p in got.problems)
    assert [c["name"] for c in refined(text)] == ["first", "second"]


def test_a_closing_tag_with_a_number_does_not_stay_in_the_value():
    text = ("<tool_call>\n<function=f>\n<parameter=a>\nx\n</parameter1>\n<parameter=b>\ny\n</parameter2>\n"
            "</function>\n</tool_call>")
    got = formats.get("qwen3_coder").parse_lenient(text)
    assert got.calls == [ToolCall("f", {"a": "x", "b": "y"})] and got.problems


def test_glm46_written_with_json_escapes_gives_a_list_not_a_string():
    text = ('<tool_call>add_items\\n<arg_key>items</arg_key>\\n<arg_value>[\\"milk\\", \\"eggs\\"]</arg_value>\\n'
            "<arg_key>count</arg_key>\\n<arg_value>2</arg_value>\\n</tool_call>")
    assert formats.detect_format(text) == "glm45"
    tools = [{"type": "function", "function": {"name": "add_items", "parameters": {"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "string"}}, "count": {"type": "integer"}}}}}]
    assert refined(text, tools) == [{"name": "add_items", "arguments": {"items": ["milk", "eggs"], "count": 2}}]
    got = formats.get("glm45").parse_lenient(text)
    assert got.calls == [ToolCall("add_items", {"items": ["milk", "eggs"], "count": 2})] and got.problems


@pytest.mark.parametrize("spelt", ["<|TOOL_ARG:VALUE|>", "<|tool-arg:value|>", "<|tool_arg:value|", "[|tool_arg:value|]"])
def test_solar_open2_tokens_written_wrong_are_read_as_the_tokens(spelt):
    fmt = formats.get("solar_open2")
    calls = [ToolCall("get_weather", {"city": "Paris", "days": 3}), ToolCall("get_time", {"zone": "CET"})]
    text = fmt.render(calls)
    assert text.count("<|tool_arg:value|>") == 3
    got = fmt.parse_lenient(text.replace("<|tool_arg:value|>", spelt, 1))
    assert got.calls == calls and any(spelt in p.message for p in got.problems)


@pytest.mark.parametrize("name", ROW_NAMES)
@pytest.mark.parametrize("how", ["lost", "another format's token"])
def test_a_first_call_whose_opening_tag_was_lost_is_read_by_its_name(name, how):
    # The name stands as the tag would hold it (name="f">, f>, or f and its separator) before the first key tag.
    fmt = formats.get(name)
    s = fmt.spelling
    calls = [ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_time", {"zone": "CET"})]
    opener = s.call_open[:-1] + s.tag_suffix + s.call_open[-1] if s.tag_suffix else s.call_open
    text = fmt.render(calls)
    got = fmt.parse_lenient(text.replace(opener, "" if how == "lost" else "<|im_sep|>", 1))
    assert got.calls == calls
    assert any(p.code == "missing_tag" for p in got.problems)


ATTR_ROWS = [n for n in ROW_NAMES if formats.get(n).spelling.name_at == "attr"]


@pytest.mark.parametrize("name", ATTR_ROWS)
@pytest.mark.parametrize("where", ["call", "key"])
def test_an_attribute_whose_closing_quote_was_lost_is_read_to_the_end_of_its_tag(name, where):
    # <invoke name="get_time> (the quote before '>' lost): the name runs to the tag's end; the text stays invalid.
    fmt = formats.get(name)
    s = fmt.spelling
    calls = [ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_time", {"zone": "CET"})]
    text = fmt.render(calls)
    attr, value = (s.name_attr, "get_time") if where == "call" else (s.key_attr, "zone")
    if s.key_at != "attr" and where == "key":
        pytest.skip(f"{name} writes its keys as {s.key_at}, not in an attribute")
    quoted = f'{attr}="{value}"'
    assert quoted in text
    broken = text.replace(quoted, quoted[:-1], 1)
    with pytest.raises(FormatError):
        fmt.parse_strict(broken)
    assert fmt.parse_lenient(broken).calls == calls


TEXT_NAME_ROWS = [n for n in ROW_NAMES if formats.get(n).spelling.name_at == "text"
                  and formats.get(n).spelling.key_at == "element"]


@pytest.mark.parametrize("name", TEXT_NAME_ROWS)
def test_a_name_run_into_its_first_key_is_split_by_the_offered_tools(name):
    # NAMEkey</key>: the first key's opening tag (and the name's separator) lost; split only where the request's tools
    # say so: the tool's name, then one of its parameters.
    fmt = formats.get(name)
    s = fmt.spelling
    calls = [ToolCall("get_weather", {"city": "Paris", "unit": "c"})]
    text = fmt.render(calls)
    suffixed = (lambda t: t[:-1] + s.tag_suffix + t[-1]) if s.tag_suffix else (lambda t: t)
    first = text.index(suffixed(s.key_open))
    head, sep = text[:first], suffixed(s.name_sep) if s.name_sep.strip() else s.name_sep
    run = (head[: -len(sep)] if sep and head.endswith(sep) else head) + text[first + len(suffixed(s.key_open)):]
    assert "get_weathercity" + suffixed(s.key_close) in run
    tools = {"get_weather": {"city": {}, "unit": {}}}
    got = fmt.parse_lenient(run, tools=tools)
    assert got.calls == calls
    assert any(p.code == "missing_tag" for p in got.problems)
    assert not any(c.name == "get_weather" for c in fmt.parse_lenient(run).calls)
    assert not any(c.name == "get_weather" for c in fmt.parse_lenient(run, tools={"get_weather": {"town": {}}}).calls)


@pytest.mark.parametrize("name", [r.family.name for r in rows_of(XmlParams) if r.spelling.key_at in ("eq", "attr")])
@pytest.mark.parametrize("how", ["lost", "written wrong"])
def test_a_parameter_whose_opening_tag_was_lost_is_read_from_its_label(name, how):
    """``<parameter=`` lost (or written otherwise) before ``KEY>VALUE</parameter>``, or DSML's ``<｜DSML｜parameter``
    before ``name="KEY" ...>``: the label and the closing tag tell the parameter; a label with no closing tag after it
    stays text."""
    fmt = formats.get(name)
    calls = [ToolCall("find", {"where": "2022/AL2562", "court": "CA"}), ToolCall("f", {"a": "x"})]
    text = fmt.render(calls)
    key_open = fmt.spelling.key_open
    damaged = text.replace(key_open, "" if how == "lost" or fmt.spelling.key_at == "eq" else key_open.upper(), 1)
    with pytest.raises(FormatError):
        fmt.parse_strict(damaged)
    got = fmt.parse_lenient(damaged)
    assert got.calls == calls
    assert "missing_tag" in [p.code for p in got.problems]
    close = fmt.spelling.call_close
    prose = fmt.render([ToolCall("find", {"court": "CA"})]).replace(close, "note> hi" + close, 1)
    assert fmt.parse_lenient(prose).calls[0].arguments == {"court": "CA"}
