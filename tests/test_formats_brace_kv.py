"""The brace_kv grammar (``call:NAME{k:v}``): Gemma 4 and FunctionGemma rows, judged on canitoolcall's real Gemma 4
fixtures (when the package is installed) and on texts written from the chat template and vLLM's parsers."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats.brace_kv import BraceKV
from refiner.formats.catalog import rows_of
from refiner.pipeline import Refiner

ROWS = [(row.family, row.spelling) for row in rows_of(BraceKV)]

G = formats.get("gemma4")
F = formats.get("functiongemma")
Q, O, C = '<|"|>', "<|tool_call>", "<tool_call|>"


def _fixtures(family: str):
    try:
        from canitoolcall.fixtures import load_families, load_fixtures
    except ImportError:
        return None, []
    return load_families().get(family), load_fixtures(families=[family])


FAMILY, FIXTURES = _fixtures("gemma4")


@pytest.mark.skipif(not FIXTURES, reason="canitoolcall is not installed")
@pytest.mark.parametrize("fx", FIXTURES, ids=[fx.id for fx in FIXTURES])
def test_canitoolcall_gemma4_fixture_calls(fx):
    """Every canitoolcall Gemma 4 fixture through the pipeline (format auto-detected, the fixture's tools offered, a
    cut fixture replayed with ``finish_reason: length`` as canitoolcall's spec asks), judged by canitoolcall's own
    checks on the calls. Content and reasoning are the proxy's (another layer): the expected ones are passed
    through, so only the calls are judged here."""
    from canitoolcall.checks import run_checks
    from canitoolcall.results import Observation, ParsedToolCall, ParseResult, Status

    request = {"upstream": fx.raw_output, "tools": list(fx.tools)}
    if fx.truncated:
        request["finish_reason"] = "length"
    res = Refiner().refine(request)
    calls = tuple(ParsedToolCall(c["name"], json.dumps(c["arguments"], ensure_ascii=False)) for c in res["calls"])
    if fx.expected is not None:
        content, reasoning = fx.expected.content, fx.expected.reasoning_content
    else:
        content, reasoning = (None if calls else fx.raw_output), None
    rows = run_checks(fx, FAMILY, Observation(nonstream=ParseResult(content, reasoning, calls), streams={}))
    failed = [r for r in rows if r.status is Status.FAIL]
    assert not failed, [(r.check, r.detail) for r in failed]
    assert any(r.check in ("expected_match", "expected_error") for r in rows)


def test_rows_are_registered_with_their_family_data():
    assert [f.name for f in (G, F)] == [fam.name for fam, _ in ROWS]
    assert G.reasoning[0] == ("<|channel>thought\n", "<channel|>") and {c for _, c in G.reasoning} == {"<channel|>"}
    assert G.row.models and G.row.sources
    assert G.tags == (O, Q, C) and G.detection.markers == (O,)
    assert F.detection.rank == G.detection.rank + 1
    assert G.example == G.render(G.parse_strict(G.example))  # the example is the render


def test_values_of_every_type_and_keys_as_the_template_writes_them():
    text = (f"{O}call:record{{flag:false,key with space:1.5e-05,none:null,other:None,obj:{{a:[1,{Q}t{Q}],B:1}},"
            f"s:{Q}x,y}} \"q\"{Q},big:1e+21,neg:-3,{Q}quoted key{Q}:{Q}v{Q}}}{C}")
    [call] = G.parse_strict(text)
    assert call == ToolCall("record", {"flag": False, "key with space": 1.5e-05, "none": None, "other": None,
                                       "obj": {"a": [1, "t"], "B": 1}, "s": 'x,y} "q"', "big": 1e21, "neg": -3,
                                       "quoted key": "v"})
    assert type(call.arguments["neg"]) is int and type(call.arguments["big"]) is float


def test_render_keeps_key_order_quotes_keys_a_bare_key_cannot_hold_and_refuses_the_quote_token():
    call = ToolCall("f", {"b": 1, "A": 2, "a_c": "x", "Zeta": True, "": 0, "k:v": [None, 2.5], " pad": {}})
    text = G.render([call])
    assert text == f"{O}call:f{{b:1,A:2,a_c:{Q}x{Q},Zeta:true,{Q}{Q}:0,{Q}k:v{Q}:[null,2.5],{Q} pad{Q}:{{}}}}{C}"
    assert G.parse_strict(text) == [call]
    with pytest.raises(formats.RenderError):
        G.render([ToolCall("f", {"s": f"a{Q}b"})])
    with pytest.raises(formats.RenderError):
        G.render([ToolCall("f", {"x": float("nan")})])
    with pytest.raises(formats.RenderError):
        G.render([ToolCall("get weather", {})])


def test_markers_inside_strings_are_text():
    value = f"calls look like {O}call:f{{}}{C}; thoughts end with <channel|> and </think>"
    call = ToolCall("echo", {"text": value})
    text = G.render([call])
    assert G.parse_strict(text) == [call] and G.parse_lenient(text).calls == [call]
    assert formats.detect_format(text) == "gemma4"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (f"{O}call:bad_func no brace{C}", "not a call between the call tokens"),
        (f"{O}get_weather{{}}{C}", "call:"),
        (f"{O}call:f{{city:Paris}}{C}", "unquoted value"),
        (f"{O}call:f{{city:{Q}Paris{Q}}}", "missing <tool_call\\|>"),
        (f"{O}call:f{{city:{Q}Paris}}{C}", "closing"),
        (f"{O}call:f{{a:1,}}{C}", "comma"),
        (f"{O}call:f{{a:{Q}x{Q} b:2}}{C}", "expected ,"),
        (f"{O}call:f{{a:1,a:2}}{C}", "twice"),
        (f"{O}call:f{{x:1e999}}{C}", "out of range"),
        ("no call here", "no <|tool_call>"),
    ],
)
def test_strict_rejects_with_message(text, words):
    with pytest.raises(formats.FormatError, match=words):
        G.parse_strict(text)


def test_junk_between_the_tokens_is_no_call():
    got = G.parse_lenient(f"{O}call:bad_func no brace{C}")
    assert got.calls == [] and [p.code for p in got.problems] == ["unreadable"]
    got = G.parse_lenient(f"<|channel>thought\nhmm<channel|>{O}nah uhg{C}")
    assert got.calls == []


def test_cuts_are_marked_where_the_text_stops():
    mid = G.parse_lenient(f"{O}call:f{{a:{Q}x{Q},b:{Q}Par")
    assert mid.calls == [ToolCall("f", {"a": "x", "b": "Par"})]
    assert mid.cut.index == 0 and not mid.cut.clean and mid.cut.arguments == {"a": "x"}
    clean = G.parse_lenient(f"{O}call:f{{a:{Q}x{Q},n:true")
    assert clean.cut.clean and clean.cut.arguments == {"a": "x", "n": True}
    number = G.parse_lenient(f"{O}call:f{{a:{Q}x{Q},n:12")
    assert not number.cut.clean and number.cut.arguments == {"a": "x"}
    name = G.parse_lenient(f"{O}call:get")
    assert name.calls == [] and name.cut is not None and name.cut.index is None
    second = G.parse_lenient(f"{O}call:f{{}}{C}{O}call:g{{q:{{x:[1,")
    assert [c.name for c in second.calls] == ["f", "g"] and second.cut.index == 1 and not second.cut.clean


def test_lost_closers_end_a_call_at_the_next_call_token():
    got = G.parse_lenient(f"{O}call:f{{a:{Q}x{Q}{O}call:g{{b:2}}{C}")
    assert got.calls == [ToolCall("f", {"a": "x"}), ToolCall("g", {"b": 2})]
    assert {p.code for p in got.problems} >= {"unclosed"}


def test_loose_literals_and_bare_text_are_read_and_reported():
    got = G.parse_lenient(f"{O}call:f{{ok:True,unit:celsius,n:None}}{C}")
    assert got.calls == [ToolCall("f", {"ok": True, "unit": "celsius", "n": None})]
    assert [p.code for p in got.problems] == ["bad_argument", "bad_argument"]


def test_reasoning_channel_and_prefilled_closer():
    calls = [ToolCall("f", {"a": 1})]
    body = G.render(calls)
    assert G.parse_strict(f"<|channel>thought\nI could write {O}call:g{{}}{C} here<channel|>{body}") == calls
    assert G.parse_strict(f"drafting...<channel|>{body}") == calls  # the opener was in the prompt
    assert G.parse_lenient("<|channel>thought\nThe user wants the current weather").calls == []


def test_deep_nesting_is_refused_and_bounded():
    deep = f"{O}call:f{{a:" + "[" * 5000 + "1" + "]" * 5000 + f"}}{C}"
    with pytest.raises(formats.FormatError, match="deeper"):
        G.parse_strict(deep)
    got = G.parse_lenient(deep)
    assert got.calls == [] or all(c.arguments == {} for c in got.calls)
    assert not [p for p in got.problems if p.code == "internal"]


def test_functiongemma_reads_its_own_tokens_only():
    text = "<start_function_call>call:set_timer{label:<escape>tea<escape>,minutes:4}<end_function_call>"
    assert F.parse_strict(text) == [ToolCall("set_timer", {"label": "tea", "minutes": 4})]
    assert formats.detect_format(text) == "functiongemma"
    with pytest.raises(formats.FormatError):
        G.parse_strict(text)
    assert isinstance(F, BraceKV) and F.reasoning == ()


# The reader's plain step reads exactly what its step-by-step reading reads.
_EDITS = st.sampled_from(["", '"', "\\", ":", ",", "{", "}", "[", "]", " ", "\n", "\xa0", Q, "None", "NaN", "1e999",
                          "01", "a", "a:1,", ",a:1", "x y:", C, O, "true", "-"])
_keys = st.text(max_size=6).filter(lambda s: Q not in s)
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _keys,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=6,
)


def _typed(value):
    return json.dumps(value, sort_keys=True)  # (1, 1.0 and true told apart)


def _read(fmt, text, brace, lenient, plain):
    """The reader's reading of the object at ``brace`` (strict: the error when refused), with or without its plain
    step."""
    import re

    from refiner.formats.base import Lenient
    from refiner.formats.brace_kv import _Reader

    reader = _Reader(fmt, text, Lenient() if lenient else None)
    if not plain:
        reader.member = reader.element = re.compile("(?!)")
    try:
        args, end = reader.container(brace, 0)
    except formats.FormatError as e:
        return str(e)
    out = reader.out
    return _typed(args), end, reader.cut, reader.stopped, reader.cut_key, out and [(p.code, p.message) for p in out.problems]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([G, F]), st.lists(st.dictionaries(_keys, _values, max_size=4), min_size=1, max_size=3),
       st.lists(st.tuples(st.integers(min_value=0, max_value=600), st.integers(min_value=0, max_value=3), _EDITS),
                max_size=3), st.booleans())
@example(G, [{"None": None}], [], False)  # a key spelt like the literal None
def test_plain_step_agrees_with_the_reader(fmt, many, edits, lenient):
    """Strict and lenient, the reader reads the same (arguments, end, cut, problems) with or without its plain
    step, on renderings of both rows and on copies damaged anywhere (a token, a quote, a brace, a space, ``None``
    put in or cut out), at every brace."""
    text = fmt.render([ToolCall("f", a) for a in many])
    for at, cut, insert in edits:
        at %= len(text) + 1
        text = text[:at] + insert + text[at + cut :]
    for brace in [i for i, ch in enumerate(text) if ch == "{"]:
        assert _read(fmt, text, brace, lenient, True) == _read(fmt, text, brace, lenient, False), (text, brace)


@pytest.mark.parametrize("fmt", [G, F], ids=["gemma4", "functiongemma"])
def test_plain_members_are_read_at_once(fmt, monkeypatch):
    """Each member of a call whose keys are plain words and whose values are strings (no ``<`` inside), numbers and
    literals is read by the reader's plain step."""
    from refiner.formats.brace_kv import _Reader

    taken = []
    plain = _Reader.plain
    monkeypatch.setattr(_Reader, "plain", lambda self, m: taken.append(m) or plain(self, m))
    args = {"city": "Paris, \"France\" [x]", "n": 5, "x": -1.5e3, "ok": True, "none": None, "my key": "a:b}"}
    text = fmt.render([ToolCall("get_weather", args)])
    assert fmt.parse_strict(text) == [ToolCall("get_weather", args)]
    assert len(taken) == len(args)


def test_gemma4_thought_channel_name_is_not_reasoning():
    """The channel's name ("thought") is markup: the reasoning is what follows it, as canitoolcall's Gemma 4 fixtures
    expect it."""
    from refiner.formats.reasoning import split_reasoning

    text = '<|channel>thought\nThe user wants Paris.\n<channel|><|tool_call>call:f{city:<|"|>Paris<|"|>}<tool_call|>'
    split = split_reasoning(text)
    assert split.reasoning(text).strip() == "The user wants Paris."
    assert text[split.answer:].startswith("<|tool_call>")


def _two_calls(fmt):
    return fmt.render([ToolCall("get_weather", {"city": "Paris", "n": 5}), ToolCall("f", {"a": [1, 2]})])


WANT = [ToolCall("get_weather", {"city": "Paris", "n": 5}), ToolCall("f", {"a": [1, 2]})]


@pytest.mark.parametrize("name", [family.name for family, _ in ROWS])
@pytest.mark.parametrize("damage", ["all tokens dropped", "call tokens dropped", "open upper", "open in brackets",
                                    "open lost >", "open as another format's tag", "close without underscore",
                                    "close lost"])
def test_call_tokens_written_wrong_or_dropped_are_read(name, damage):
    """A serving stack that drops special tokens (vLLM's skip_special_tokens) leaves ``call:NAME{...}`` alone; a
    token written wrong (case, separators, brackets, a lost ``>``, another format's tag) is read as the token. Each
    is reported as a missing tag, and the strict reading refuses the text."""
    fmt = formats.get(name)
    sp = fmt.spelling
    text = _two_calls(fmt)
    damaged = {
        "all tokens dropped": text.replace(sp.call_open, "\n").replace(sp.call_close, "").replace(sp.quote, ""),
        "call tokens dropped": text.replace(sp.call_open, "\n").replace(sp.call_close, ""),
        "open upper": text.replace(sp.call_open, sp.call_open.upper(), 1),
        "open in brackets": text.replace(sp.call_open, "[" + sp.call_open[1:-1] + "]", 1),
        "open lost >": text.replace(sp.call_open, sp.call_open[:-1], 1),
        "open as another format's tag": text.replace(sp.call_open, "<tool_call>", 1),
        "close without underscore": text.replace(sp.call_close, sp.call_close.replace("_", "", 1), 1),
        "close lost": text.replace(sp.call_close, "", 1),
    }[damage]
    with pytest.raises(formats.FormatError):
        fmt.parse_strict(damaged)
    got = fmt.parse_lenient(damaged)
    assert got.calls == WANT
    assert any(p.code == "missing_tag" for p in got.problems)


@pytest.mark.parametrize("name", ["gemma4", "functiongemma"])
def test_a_call_written_in_prose_is_not_read_as_one(name):
    """``call:NAME{`` inside a sentence is content, with or without call tokens elsewhere."""
    fmt = formats.get(name)
    prose = "You could use call:get_weather{city:x} for that, I think."
    assert fmt.parse_lenient(prose).calls == []
    text = "I will call:get_weather{city:x} now " + _two_calls(fmt)
    assert fmt.parse_strict(text) == WANT


def _read_mended(fmt, text, damaged, calls):
    """``damaged`` (a slip in ``text``) is refused strictly and read leniently as ``calls``, noted ``mended``."""
    assert damaged != text
    with pytest.raises(formats.FormatError):
        fmt.parse_strict(damaged)
    got = fmt.parse_lenient(damaged)
    assert got.calls == calls
    assert any(p.code == "mended" for p in got.problems)


@pytest.mark.parametrize("name", [family.name for family, _ in ROWS])
@pytest.mark.parametrize("value", ["2022/AL2562", "Golden State Warriors", "Nashville, TN", "4x + 7"])
def test_a_string_whose_opening_quote_token_was_lost_is_read_to_its_closing_one(name, value):
    """``city:Paris<|"|>,``: the text up to the closing quote token is the string (a comma in it too), the members
    after it are read; a bare word with no quote token after it stays an unquoted value."""
    fmt = formats.get(name)
    q = fmt.spelling.quote
    calls = [ToolCall("find", {"where": value, "n": 5, "tags": ["a"]}), ToolCall("f", {"a": "x"})]
    text = fmt.render(calls)
    _read_mended(fmt, text, text.replace(f"where:{q}", "where:", 1), calls)
    bare = fmt.parse_lenient(text.replace(f"where:{q}{value}{q}", "where:hello", 1)).calls
    assert bare[0].arguments == {"where": "hello", "n": 5, "tags": ["a"]}


def test_gemma4_quote_token_written_with_single_quotes_is_read_as_the_token():
    """``<|'|>`` for ``<|"|>`` around every string: read as the quote token, reported."""
    calls = [ToolCall("log_food", {"food_name": "iced coffee", "portion": 12.0, "tags": ["a", "b c"]})]
    text = G.render(calls).replace(Q, "<|'|>")
    with pytest.raises(formats.FormatError):
        G.parse_strict(text)
    got = G.parse_lenient(text)
    assert got.calls == calls
    assert any(p.code == "missing_tag" and "<|'|>" in p.message for p in got.problems)


@pytest.mark.parametrize("name", [family.name for family, _ in ROWS])
def test_a_colon_lost_between_a_key_and_its_string_is_read(name):
    """``date<|"|>2023-03-05<|"|>``: the key, then its string; a bare value after a key with no ':' stays unread."""
    fmt = formats.get(name)
    q = fmt.spelling.quote
    calls = [ToolCall("weather", {"city": "London", "date": "2023-03-05"})]
    text = fmt.render(calls)
    _read_mended(fmt, text, text.replace(f"date:{q}", f"date{q}", 1), calls)
    bare = fmt.render([ToolCall("f", {"a": 1, "years": 10})]).replace("years:10", "years10")
    assert fmt.parse_lenient(bare).calls == [ToolCall("f", {"a": 1})]


@pytest.mark.parametrize("name", [family.name for family, _ in ROWS])
def test_a_brace_lost_after_an_offered_tools_name_is_read_by_the_tools(name):
    """``call:weathercity:...}``: the name split where an offered tool's name meets one of its parameters; without
    the tools, or with a rest that is no parameter of theirs, the text is not split and the call is not read."""
    fmt = formats.get(name)
    calls = [ToolCall("weather", {"city": "London", "days": 3}), ToolCall("weather", {"city": "Oslo"})]
    damaged = fmt.render(calls).replace("weather{", "weather", 1)
    with pytest.raises(formats.FormatError):
        fmt.parse_strict(damaged)
    got = fmt.parse_lenient(damaged, tools={"weather": {"city": {}, "days": {}}})
    assert got.calls == calls
    assert any(p.code == "missing_tag" and "'{'" in p.message for p in got.problems)
    for tools in (None, {"weather": {"town": {}}}, {"weath": {"town": {}}, "other": {"city": {}}}):
        assert fmt.parse_lenient(damaged, tools=tools).calls[:1] != calls[:1]
