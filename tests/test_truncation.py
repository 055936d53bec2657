"""Truncation is honest: an upstream cut off mid-call (its ``finish_reason`` says ``length``, or the text stops
mid-value) keeps its complete calls, and the call it stops in is reported, never completed with invented values.

Checked per format on cuts inside a string, after a key, after a colon, between calls, inside a tool name; through
the lenient parsers (``Lenient.cut``), tier 1 (``drop_cut``) and the pipeline (stage ``truncated``, the ``cut``
field); and, as a property, on every cut of rendered call lists in every registered format: what the pipeline returns
is never a call the upstream did not write whole.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refiner import formats
from refiner.calls import ToolCall
from refiner.gate import check_text
from refiner.pipeline import CUT_FINISH_REASONS, Refiner, RequestError
from refiner.repair import repair_parsed, repair_text

ALL = [f.name for f in formats.by_rank()]
TOOLS = [
    {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
    {
        "name": "book_table",
        "parameters": {
            "type": "object",
            "properties": {"restaurant": {"type": "string"}, "when": {"type": "string"}, "people": {"type": "integer"}},
            "required": ["restaurant"],
        },
    },
]
GOLD = [
    ToolCall("get_weather", {"city": "Paris", "days": 3}),
    ToolCall("book_table", {"restaurant": "Chez Nous", "when": "tonight at eight", "people": 4}),
]


def _fit(fmt: formats.WireFormat, calls: list[ToolCall]) -> list[ToolCall]:
    """``calls`` as ``fmt`` writes them (output labels, steps, names only)."""
    out = []
    for i, c in enumerate(calls):
        outputs = (f"API_call_{i}",) if fmt.outputs == "list" else (f"$var_{i}",) if fmt.outputs == "one" else ()
        args = {} if fmt.names_only else dict(c.arguments)
        out.append(ToolCall(c.name, args, outputs, i + 1 if fmt.steps else None))
    return out


def _cut(text: str, marker: str, extra: int) -> str:
    i = text.rfind(marker)
    assert i >= 0, (marker, text)
    return text[: i + extra]


# where to cut the second call, per kind: (markers, the first found from the end; characters of it kept)
CUTS = {
    "inside a string": (("Chez Nous",), 4),
    "inside a later string": (("tonight at eight",), 7),
    "after a key": (('"when"', '\\"when\\"', "when=", "when:"), None),  # and the XML rows' key tags
}


def _key_tag(fmt: formats.WireFormat, key: str) -> tuple[str, ...]:
    """The tag that writes ``key`` in an XML grammar's row, read from the row's spelling (not its name): the
    element named by the key (a namespace token before it: MiniMax-M3), or the key tags (``<parameter=K>``,
    ``<arg_key>K</arg_key>``, a per-checkpoint suffix before each ``>`` where the row writes one)."""
    s = getattr(fmt, "spelling", None)
    if getattr(s, "ns", None):
        return (f"{s.ns}<{key}>",)
    if getattr(s, "key_at", None) not in ("eq", "element"):
        return ()
    suffix = getattr(s, "tag_suffix", "")

    def tag(t: str) -> str:
        return t[:-1] + suffix + ">" if suffix and t.endswith(">") else t

    return (tag(s.key_open) + key + (tag(s.key_close) if s.key_at == "element" else s.key_close),)


def _markers(fmt: formats.WireFormat, kind: str) -> tuple[str, ...]:
    markers, _ = CUTS[kind]
    return markers + _key_tag(fmt, "when") if kind == "after a key" else markers


@pytest.mark.parametrize("name", [n for n in ALL if not formats.get(n).names_only])
@pytest.mark.parametrize("kind", list(CUTS))
def test_a_cut_inside_the_last_call_keeps_the_complete_ones(name, kind):
    """The reader marks the call the text stops in (``Lenient.cut``, with what was written whole), or leaves it out;
    either way the pipeline returns the complete call only, and says the upstream was cut when it can tell."""
    fmt = formats.get(name)
    gold = _fit(fmt, GOLD)
    text = fmt.render(gold)
    _, keep = CUTS[kind]
    marker = next(m for m in _markers(fmt, kind) if m in text)  # (pythonic formats write keys bare, OpenAI's
    # escaped, XML dialects in their tags)
    cut = _cut(text, marker, len(marker) if keep is None else keep)
    got = fmt.parse_lenient(cut)
    assert got.calls[0] == gold[0]
    if got.cut is not None:
        assert got.cut.index == 1 and not got.cut.clean, (cut[-40:], got.cut)
        assert any(p.code == "truncated" for p in got.problems)
        written = got.cut.arguments  # what the cut call held whole before the cut
        assert all(gold[1].arguments[k] == v for k, v in written.items())
        assert "when" not in written
    else:  # a reader that leaves the cut call out
        assert len(got.calls) == 1, got.calls
    for finish in (None, "length"):
        req = {"tools": TOOLS, "upstream": cut, "format": name, **({"finish_reason": finish} if finish else {})}
        res = Refiner().refine(req)
        assert [c["name"] for c in res["calls"]] == ["get_weather"], (finish, res["calls"])
        assert res["calls"][0]["arguments"] == dict(gold[0].arguments)
        assert "Chez" not in res["refined"]  # the cut call is not in the text handed back
        assert formats.get(name).parse_strict(res["refined"]) == [gold[0]]
        if finish or got.cut is not None:
            assert res["stage"] == "truncated", res["reason"]
            assert res["cut"]["finish_reason"] == finish
        json.dumps(res)


@pytest.mark.parametrize("name, kind", [(n, k) for n in ["hermes", "xlam", "nestools", "glaive", "apibank", "openai",
                                                         "anthropic", "nestful", "toolace"] for k in CUTS])
def test_the_built_in_readers_say_what_was_written_whole(name, kind):
    fmt = formats.get(name)
    gold = _fit(fmt, GOLD)
    text = fmt.render(gold)
    markers, keep = CUTS[kind]
    marker = next(m for m in markers if m in text)
    got = fmt.parse_lenient(_cut(text, marker, len(marker) if keep is None else keep))
    assert got.cut is not None and got.cut.index == 1 and got.cut.name == "book_table"
    assert ("restaurant" in got.cut.arguments) == (kind != "inside a string")
    res = Refiner().refine({"tools": TOOLS, "upstream": _cut(text, marker, len(marker) if keep is None else keep),
                            "format": name})
    assert res["cut"]["index"] == 1 and res["cut"]["finish_reason"] is None
    assert any(a["code"] == "drop_cut" for a in res["actions"])


@pytest.mark.parametrize("name", ALL)
def test_a_cut_between_calls(name):
    """Cut right after the first call (a comma or NexusRaven's ``;``, or the opening of the second: a tag, a brace,
    Mistral's ``[TOOL_CALLS]``): nothing is dropped, the stage says the upstream was cut."""
    fmt = formats.get(name)
    gold = _fit(fmt, GOLD)
    text = fmt.render(gold)
    second = "book_table"
    i = text.find(second)
    j = max(text.rfind(sep, 0, i) for sep in (",", ";", "<", "\n", "{", "["))
    cut = text[:j]
    res = Refiner().refine({"tools": TOOLS, "upstream": cut, "format": name, "finish_reason": "length"})
    assert res["stage"] == "truncated"
    assert [c["name"] for c in res["calls"]] == ["get_weather"], (cut[-30:], res["calls"])
    assert res["cut"]["finish_reason"] == "length"
    assert "the upstream was cut off" in res["reason"]


@pytest.mark.parametrize("name", ["hermes", "xlam", "nestools", "openai", "anthropic", "nestful", "glaive", "apibank"])
def test_a_cut_inside_the_tool_name(name):
    fmt = formats.get(name)
    text = fmt.render(_fit(fmt, GOLD))
    cut = _cut(text, "book_table", 4)
    got = fmt.parse_lenient(cut)
    assert got.cut is not None and got.cut.name is None
    res = Refiner().refine({"tools": TOOLS, "upstream": cut, "format": name})
    assert res["stage"] == "truncated"
    assert [c["name"] for c in res["calls"]] == ["get_weather"]


def test_a_text_that_lost_only_its_closers_is_closed_unless_the_upstream_says_it_was_cut():
    """Stopping right after a complete value also reads as a lost ending: closed as before (stage repaired); with
    finish_reason "length" the same text is a cut, and the call it stops in is left out."""
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>\n'
    text += '<tool_call>\n{"name": "book_table", "arguments": {"restaurant": "Chez Nous"'
    got = formats.get("hermes").parse_lenient(text)
    assert got.cut is not None and got.cut.clean and got.cut.index == 1
    assert not any(p.code == "truncated" for p in got.problems)
    res = Refiner().refine({"tools": TOOLS, "upstream": text})
    assert res["stage"] == "repaired" and [c["name"] for c in res["calls"]] == ["get_weather", "book_table"]
    assert "cut" not in res
    for reason in CUT_FINISH_REASONS:
        res = Refiner().refine({"tools": TOOLS, "upstream": text, "finish_reason": reason})
        assert res["stage"] == "truncated" and [c["name"] for c in res["calls"]] == ["get_weather"]
        assert res["cut"] == {"index": 1, "name": "book_table", "arguments": {"restaurant": "Chez Nous"},
                              "clean": True, "finish_reason": reason}


@pytest.mark.parametrize(
    "name, text",
    [
        ("xlam", '<func_call>[{"name": "book_table", "arguments": {"restaurant": "Chez Nous", "people": 1'),
        ("toolace", '<function_list>[book_table(restaurant="Chez Nous", people=1'),
    ],
)
def test_a_number_at_the_cut_is_a_cut(name, text):
    """A text that ends in a number may have been cut inside it (12 may be the start of 123): a cut, the number
    left out of what was written whole, the call left out of the result."""
    got = formats.get(name).parse_lenient(text)
    assert got.cut.arguments == {"restaurant": "Chez Nous"} and not got.cut.clean
    assert got.calls[0].arguments["people"] == 1  # (the lenient read keeps what was written)
    assert Refiner().refine({"tools": TOOLS, "upstream": text, "format": name})["calls"] == []


def test_a_complete_upstream_that_hit_its_limit_is_truncated_but_unchanged():
    text = formats.get("hermes").render(GOLD)
    res = Refiner().refine({"tools": TOOLS, "upstream": text, "finish_reason": "length"})
    assert res["stage"] == "truncated" and res["changed"] is False and res["refined"] == text
    assert [c["name"] for c in res["calls"]] == ["get_weather", "book_table"]
    assert res["cut"]["index"] is None and "any call after them is missing" in res["reason"]
    for other in ("stop", "tool_calls", None):
        req = {"tools": TOOLS, "upstream": text}
        if other is not None:
            req["finish_reason"] = other
        assert Refiner().refine(req)["stage"] == "unchanged"


def test_finish_reason_is_validated():
    with pytest.raises(RequestError, match="finish_reason"):
        Refiner().refine({"upstream": "x", "finish_reason": 1})
    out = Refiner().refine_batch([{"upstream": "x", "finish_reason": ["length"]}], errors="result")
    assert out[0]["stage"] == "error" and "finish_reason" in out[0]["error"]


def test_the_model_never_completes_a_cut_call():
    """A truncated upstream is not sent to the model (it would complete the cut call by inventing its values)."""

    class Recorder:
        def __init__(self):
            self.seen = 0

        def chat(self, conversations, **kw):
            self.seen += len(conversations)
            answer = formats.get("hermes").render([ToolCall("book_table", {"restaurant": "Chez Nous"})])
            return [[answer] for _ in conversations]

    engine = Recorder()
    cut = _cut(formats.get("hermes").render(GOLD), "Chez Nous", 4)
    res = Refiner(engine, bypass=False).refine({"tools": TOOLS, "upstream": cut})
    assert engine.seen == 0 and res["stage"] == "truncated"


def test_tier1_drops_the_cut_call_and_says_so():
    cut = _cut(formats.get("xlam").render(GOLD), "tonight", 3)
    t1 = repair_text(cut, "xlam", None)
    assert t1.calls == [GOLD[0]]
    assert t1.actions[0].code == "drop_cut" and t1.actions[0].call == 1
    assert formats.get("xlam").parse_strict(t1.text) == [GOLD[0]]
    only = _cut(formats.get("xlam").render(GOLD[:1]), "Paris", 2)
    t1 = repair_text(only, "xlam", None)
    assert t1.calls == [] and formats.get("xlam").parse_strict(t1.text) == []
    clean = formats.get("xlam").render(GOLD)[: -len("]</func_call>")]  # only the closers lost: kept
    report = check_text(clean, "xlam", None)
    assert repair_parsed(report, clean, "xlam", None).calls == GOLD
    assert repair_parsed(report, clean, "xlam", None, cut_off=True).calls == GOLD  # (the cut fell between calls)



def test_a_tag_of_another_format_where_the_text_stops_closes_no_call():
    """GLM's reader took another format's opening tag as the last thing in a text for its call's closer, so salvage
    returned the call TeleChat4's text was cut in (Hypothesis found it in the test below)."""
    cut = "<tool_call>book_table</tool_call>\n<tool_call>search</tool_call>\n<tool_call>send_mail<param_key>"
    for finish_reason in ("length", None):
        res = Refiner().refine({"upstream": cut, "format": "telechat4", "finish_reason": finish_reason})
        assert [c["name"] for c in res["calls"]] == ["book_table", "search"] and res["stage"] == "truncated"
    assert formats.get("glm45").parse_lenient("<tool_call>send_mail<param_key>").calls == []
    assert formats.get("glm45").parse_lenient("<tool_call>send_mail</invoke>").calls == [ToolCall("send_mail", {})]


def test_a_tag_opened_where_the_text_stops_cuts_the_xml_call():
    """Qwen3-Coder's tag mender read another format's opening tag as the last thing in a text for </function>, and
    the XML grammar's lenient reader took a call followed only by such a tag for one whose closers were lost."""
    for fmt, cut in (("qwen3_coder", "<tool_call>\n<function=send_mail>\n<arg_key>"),
                     ("qwen3_coder", "<tool_call>\n<function=send_mail>\n<invoke name="),
                     ("telechat4", "<tool_call>send_mail\n<param_key>to</param_key><param_value>a</param_value><arg_key>")):
        for finish_reason in ("length", None):
            res = Refiner().refine({"upstream": cut, "format": fmt, "finish_reason": finish_reason})
            assert res["calls"] == [] and res["stage"] == "truncated", (fmt, cut, finish_reason)
    done = "<tool_call>\n<function=send_mail>\n</invoke>"  # a closing tag there still closes the call
    assert formats.get("qwen3_coder").parse_lenient(done).calls == [ToolCall("send_mail", {})]


@pytest.mark.parametrize("name,value", [("deepseek_v3", "A{"), ("kimi_k2", "f(a=1)"), ("deepseek_v3", "f(a=1)")])
def test_a_cut_region_keeps_its_values_from_the_other_readers(name, value):
    """Salvage claimed a tagged region only up to its last closer (DeepSeek's <｜tool▁sep｜>, Kimi-K2's
    <|tool_call_argument_begin|>) even when the text stops inside a call or a token after it, so a value there was
    read again as a call of its own (Hypothesis found ``A{`` in the test below: a text stopping inside
    <｜tool▁call▁end｜>; ``f(a=1)`` in DeepSeek V3 was read again when the text stops after its closing fence, the
    call left open with no cut marked)."""
    fmt = formats.get(name)
    gold = [ToolCall("get_weather", {"city": "", "days": value, "when": ""})]
    text = fmt.render(gold)
    for p in range(1, len(text)):
        res = Refiner().refine({"upstream": text[:p], "format": name, "finish_reason": "length"})
        _nothing_invented(res["calls"], gold, fmt, clean_tail=False)


_HERMES_CALL = '<tool_call>{"name": "search", "arguments": {}}</tool_call>'


@pytest.mark.parametrize("name", ["deepseek_v32", "seed_oss", "minimax_m2", "kimi_k3", "granite_pythonic"])
def test_a_call_quoted_in_a_cut_call_is_a_value(name, value=_HERMES_CALL):
    """A text cut inside or right after a call of the requested format whose value quotes a Hermes call was read as
    Hermes (whose strict reader takes any text around its tags, or whose marker chose it when the requested format
    has none), so the quoted call was returned."""
    fmt = formats.get(name)
    tools = [*TOOLS, {"name": "search", "parameters": {"type": "object", "properties": {"note": {"type": "string"}}}}]
    gold = [ToolCall("get_weather", {"city": "", "days": value, "when": ""})]
    text = fmt.render(gold)
    for p in range(1, len(text)):
        for finish in ("length", None):
            res = Refiner().refine({"tools": tools, "upstream": text[:p], "format": name, "finish_reason": finish})
            _nothing_invented(res["calls"], gold, fmt, clean_tail=finish is None)


@pytest.mark.parametrize("name", ["internlm", "hyperclovax_14b", "apertus", "command_a", "command_r_plus", "rwkv",
                                  "inkling", "k2_horizon_json"])
def test_a_tag_look_alike_inside_a_cut_json_string_is_text(name):
    """The JSON-block formats' respelling took a Hermes tag inside a value's string for their opening tag when their
    own opening tag is no tag token (``Action:\n```json``) or holds two (InternLM), so a text cut inside that string
    gave the call with its value rewritten and no cut marked."""
    test_a_call_quoted_in_a_cut_call_is_a_value(name)


@pytest.mark.parametrize("name,value", [
    *((name, _HERMES_CALL) for name in ("minimax", "jamba", "nemotron", "pangu", "qwen25_coder_tools", "longcat_json",
                                        "phi4_mini_tags", "step_audio_2", "multi_format_gptoss")),
    ("functionary_v31", "<function=search></function>"),
])
def test_a_closing_tag_inside_a_cut_json_string_is_text(name, value):
    """A closing tag inside a value's string ended the call's arguments (the JSON-block formats' respelling, the
    named-JSON rows' reader by a plain search), so a text cut right after it gave the call with the value cut short
    and no cut marked."""
    test_a_call_quoted_in_a_cut_call_is_a_value(name, value)


_FUNCTION_CALL = "<function=search></function>"


@pytest.mark.parametrize("name,value", [
    *((name, _HERMES_CALL) for name in ("qwen3_coder", "telechat4", "glm45", "hunyuan_v3", "hunyuan_v4")),
    *((name, _FUNCTION_CALL) for name in ("qwen3_coder", "zaya_xml", "seed_oss", "minicpm5")),
])
def test_a_call_opened_inside_a_cut_raw_value_is_the_values_text(name, value):
    """An XML row writes values raw, so a text stopping in a value that holds a call's opening tag cannot be told
    from one whose closers were lost before a new call: the call is read as cut in that value (no call of the value's
    text, nor the value ended at the tag as written whole)."""
    test_a_call_quoted_in_a_cut_call_is_a_value(name, value)


@pytest.mark.parametrize("name,value", [(name, value) for name in ("anthropic", "nestful", "llama3_json", "openai")
                                        for value in (_HERMES_CALL, _FUNCTION_CALL)])
def test_a_marker_inside_a_cut_json_string_opens_no_region(name, value):
    """Salvage took a marker inside a string of the JSON the text starts with for the start of that format's region,
    so a text cut in or after that string gave the call quoted in the value (and the cut call, its string closed)."""
    test_a_call_quoted_in_a_cut_call_is_a_value(name, value)


@pytest.mark.parametrize("name", ["gemma4", "functiongemma"])
def test_a_token_look_alike_inside_a_cut_quoted_value_is_text(name):
    """Gemma 4's respelling read a look-alike of its tokens inside a value between quote tokens (``<|"|>``) as the
    token, so a text cut after that value gave the call with the value's text changed and the cut taken as clean."""
    test_a_call_quoted_in_a_cut_call_is_a_value(name)


@pytest.mark.parametrize("name,value", [
    ("multi_format_python", _HERMES_CALL),
    ("llama4_pythonic", "<|python_start|>[search(note='x')]<|python_end|>"),
    ("lfm2", "<|tool_call_start|>[search()]<|tool_call_end|>"),
    ("olmo3", "<function_calls>search()</function_calls>"),
])
def test_a_sentinel_inside_a_cut_pythonic_string_is_text(name, value):
    """The pythonic sentinel rows' recovery split a text at every open token and ended a block at the first close
    token, inside a string value too, so a text cut in or after that string gave the call with the value cut short
    (a ']' appended) or a call of the string's text."""
    test_a_call_quoted_in_a_cut_call_is_a_value(name, value)


@pytest.mark.parametrize("name,calls", [
    ("anthropic", [ToolCall("get_weather", {"city": ["<arg_key>"]}), ToolCall("get_weather", {"city": ""})]),
    ("nestful", [ToolCall("get_weather", {}), ToolCall("get_weather", {}),
                 ToolCall("get_weather", {"city": ["</tool_call>"]})]),
])
def test_a_marker_in_a_cut_untagged_text_chooses_no_other_format(name, calls):
    """An untagged format has no tags, so the marker of a tagged one in a value (GLM's <arg_key>, Hermes'
    </tool_call>) chose that format for a text cut inside a later call, and its reading returned the cut call with
    its name or values cut short (Hypothesis found both in the test below)."""
    fmt = formats.get(name)
    gold = _fit(fmt, calls)
    text = fmt.render(gold)
    for p in range(1, len(text)):
        for finish in ("length", None):
            res = Refiner().refine({"upstream": text[:p], "format": name, "finish_reason": finish})
            _nothing_invented(res["calls"], gold, fmt, clean_tail=finish is None)


def test_a_separator_where_a_cut_string_stops_is_text():
    """Llama 3's reader dropped the separator between calls ("; ") from the end of a broken call object, also when
    the text was cut inside a string right after a ';', so the value lost it and the cut was not seen (Hypothesis
    found it in the test below)."""
    fmt = formats.get("llama3_json")
    gold = [ToolCall("search", {"city": "0", "days": "a;"}), ToolCall("search", {"days": "b;"})]
    text = fmt.render(gold)
    for p in range(1, len(text)):
        for finish in ("length", None):
            res = Refiner().refine({"upstream": text[:p], "format": "llama3_json", "finish_reason": finish})
            _nothing_invented(res["calls"], gold, fmt, clean_tail=finish is None)


@pytest.mark.parametrize("name", ["harmony", "llm_jp_harmony"])
def test_a_harmony_token_inside_a_cut_value_is_text(name):
    """gpt-oss's lenient reader ended a call's arguments at a <|return|> inside a JSON string, so a text cut after it
    gave the call with that value emptied (Hypothesis found it in the test below)."""
    fmt = formats.get(name)
    gold = [ToolCall("get_weather", {}), ToolCall("get_weather", {"city": "", "when": "<|return|>"})]
    text = fmt.render(gold)
    for p in range(1, len(text)):
        res = Refiner().refine({"upstream": text[:p], "format": name, "finish_reason": "length"})
        _nothing_invented(res["calls"], gold, fmt, clean_tail=False)

SETTINGS = settings(
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# A value never holds "</think>": the first one ends the reasoning, in every format (text.reasoning_offset), so the
# calls before it are reasoning, not a cut answer (Hypothesis draws the constant from the code under test).
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FF), max_size=12).filter(
    lambda s: "</think>" not in s)
_values = st.one_of(_text, st.integers(-10**6, 10**6), st.booleans(), st.lists(_text, max_size=3))
_args = st.dictionaries(st.sampled_from(["city", "days", "when", "note", "tags"]), _values, max_size=3)
_names = st.sampled_from(["get_weather", "book_table", "search", "send_mail"])


def _written_part(got: object, want: object) -> bool:
    """``got`` is ``want`` or what a text that lost its closing brackets right after a complete value leaves of it:
    a list's first items (the last of them possibly such a part), an object's first members (likewise)."""
    if got == want and type(got) is type(want):
        return True
    if isinstance(want, list) and isinstance(got, list) and len(got) <= len(want):
        return all(g == w for g, w in zip(got[:-1], want)) and (not got or _written_part(got[-1], want[len(got) - 1]))
    if isinstance(want, dict) and isinstance(got, dict) and list(got) == list(want)[: len(got)]:
        keys = list(got)
        return all(got[k] == want[k] for k in keys[:-1]) and (not keys or _written_part(got[keys[-1]], want[keys[-1]]))
    return False


def _nothing_invented(returned: list[dict], gold: list[ToolCall], fmt: formats.WireFormat, clean_tail: bool) -> None:
    """Each returned call is a gold call written whole; only a last one, and only when the text stops right after
    a value that cannot go on (no finish_reason), may be a part of one: its first arguments, the last of them a
    list or object missing its last items."""
    assert len(returned) <= len(gold)
    for k, (got, want) in enumerate(zip(returned, gold)):
        assert got["name"] == want.name
        if got["arguments"] == dict(want.arguments) or fmt.names_only:
            continue
        assert clean_tail and k == len(returned) - 1, (got, want)
        assert _written_part(got["arguments"], dict(want.arguments)), (got, want)


@pytest.mark.parametrize("name", ALL)
@SETTINGS
@given(calls=st.lists(st.builds(ToolCall, _names, _args), min_size=1, max_size=3), data=st.data())
def test_no_cut_is_ever_completed_with_invented_values(name, calls, data):
    """Cut anywhere, in every format: with finish_reason "length" the pipeline returns only calls the upstream wrote
    whole (a prefix of them); without it, a call left open right after a complete value may be closed, and nothing
    else is invented."""
    fmt = formats.get(name)
    gold = _fit(fmt, calls)
    try:
        text = fmt.render(gold)
    except formats.RenderError:
        return
    refiner = Refiner()
    positions = sorted(set(data.draw(st.lists(st.integers(1, len(text) - 1), min_size=1, max_size=6))))
    for p in positions:
        cut = text[:p]
        res = refiner.refine({"upstream": cut, "format": name, "finish_reason": "length"})
        assert res["stage"] == "truncated"
        _nothing_invented(res["calls"], gold, fmt, clean_tail=False)
        res = refiner.refine({"upstream": cut, "format": name})
        _nothing_invented(res["calls"], gold, fmt, clean_tail=True)
        if res["stage"] == "truncated":
            assert res["cut"]["clean"] is False


# Families whose values are JSON strings read past by refiner.formats.lenient.TokenFinder: one of the family's own
# markers inside a value is text, wherever the text is cut (inside that value, or after it).
JSON_VALUE_FAMILIES = ("xlam", "jamba", "minimax", "nestools", "hermes", "apibank", "deepseek_v3", "kimi_k2",
                       "granite", "nemotron", "internlm", "longcat_json", "functionary_v32", "command_a", "pangu")


def _all_markers(fmt: formats.WireFormat) -> list[str]:
    found = {*fmt.tags, *fmt.detection.markers, *fmt.detection.closers}
    return sorted(m for m in found if m.strip())


def _whole_calls(fmt: formats.WireFormat, text: str) -> list[ToolCall]:
    """The calls of ``text`` read leniently, without the one the cut left open."""
    got = fmt.parse_lenient(text)
    return [c for i, c in enumerate(got.calls) if got.cut is None or i != got.cut.index]


def _only_written_calls(fmt: formats.WireFormat, gold: list[ToolCall]) -> None:
    """At every cut of ``gold`` rendered, the calls read whole are the first calls of ``gold``, as written."""
    try:
        text = fmt.render(gold)
    except formats.RenderError:
        return
    for p in range(1, len(text) + 1):
        whole = _whole_calls(fmt, text[:p])
        assert len(whole) <= len(gold), (p, text[:p], whole)
        for got, want in zip(whole, gold):
            assert got == want, (p, text[:p], got, want)
    assert _whole_calls(fmt, text) == gold


@pytest.mark.parametrize("name", JSON_VALUE_FAMILIES)
def test_a_marker_inside_a_value_is_text_at_every_cut(name):
    fmt = formats.get(name)
    for marker in _all_markers(fmt):
        gold = _fit(fmt, [ToolCall("get_weather", {"city": f"a {marker} b", "days": 3}),
                          ToolCall("search", {"note": f'{marker}"}}]', "tags": [marker, "x\\"]})])
        _only_written_calls(fmt, gold)


@pytest.mark.parametrize("name", ["xlam", "jamba", "nestools", "hermes", "deepseek_v3", "kimi_k2"])
@SETTINGS
@given(data=st.data())
def test_values_holding_markers_quotes_and_brackets_are_never_misread_when_cut(name, data):
    """Randomised: values built of the family's markers, quotes, backslashes, brackets and text, cut everywhere."""
    fmt = formats.get(name)
    piece = st.one_of(st.sampled_from(_all_markers(fmt)), st.sampled_from(['"', "\\", "{", "}", "[", "]", ",", ":", "\n"]),
                      _text)
    value = st.lists(piece, min_size=1, max_size=4).map("".join)
    args = st.dictionaries(st.sampled_from(["city", "days", "note", "tags"]),
                           st.one_of(value, st.lists(value, max_size=2), st.integers(-99, 99)), max_size=3)
    calls = data.draw(st.lists(st.builds(ToolCall, _names, args), min_size=1, max_size=2))
    _only_written_calls(fmt, _fit(fmt, calls))


@pytest.mark.parametrize("text", [
    '<func_call>[{"name": "f", "arguments": {"a": "x, "b": 1}}]</func_call>',
    '<func_call>[{"name": "f", "arguments": {"a": "x </func_call> y", "b": 1"}}]</func_call>',
])
def test_a_quote_lost_mid_text_still_ends_the_region_at_its_tag(text):
    """A string left open by a lost quote (the JSON before it is broken) is not a cut: the tag after it still ends
    the calls' region, and a tag in a string closed before it is still text."""
    got = formats.get("xlam").parse_lenient(text)
    assert got.cut is None
    assert "missing_tag" not in [p.code for p in got.problems]
