"""Pythonic calls in a model's sentinels (``llama4_pythonic``, ``lfm2``, ``olmo3``): grammar edge cases, recovery,
detection against toolace (the other pythonic format) and the field report of a sentinel glued onto a tool name."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import FormatError, RenderError, detect_format
from refiner.pipeline import Refiner
from refiner.specs import load_tools

L4 = formats.get("llama4_pythonic")
LFM2 = formats.get("lfm2")
OLMO3 = formats.get("olmo3")


def test_lfm2_sentinel_is_never_glued_to_the_tool_name():
    """Field report: with format "toolace" the name came back as '<|tool_call_start|>[get_candidate_status' and the
    pipeline called that "repaired". The text is strictly valid LFM2: it is read as LFM2, written as ToolACE."""
    text = "<|tool_call_start|>[get_candidate_status(candidate_id='12345')]<|tool_call_end|>"
    expected = [{"name": "get_candidate_status", "arguments": {"candidate_id": "12345"}}]
    assert detect_format(text) == "lfm2"
    res = Refiner().refine({"upstream": text})
    assert res["calls"] == expected and res["stage"] == "unchanged" and res["format"] == "lfm2"
    res = Refiner().refine({"upstream": text, "format": "toolace"})
    assert res["calls"] == expected and res["format"] == "toolace"
    assert formats.get("toolace").parse_strict(res["refined"]) == [ToolCall("get_candidate_status", {"candidate_id": "12345"})]
    # broken LFM2 (end token lost): read as LFM2 (its own tag, none of the requested format's), reported, and
    # written in the requested format
    broken = text.removesuffix("<|tool_call_end|>")
    for fmt in (None, "toolace", "hermes"):
        res = Refiner().refine({"upstream": broken, **({"format": fmt} if fmt else {})})
        assert res["calls"] == expected and res["format"] == (fmt or "lfm2"), fmt
        assert any(d["code"] == "format" for d in res["upstream_diagnostics"])
    # a broken text of the requested format itself is still read in that format
    res = Refiner().refine({"upstream": "<function_list>[get_candidate_status(candidate_id='12345')", "format": "toolace"})
    assert res["calls"] == expected


def test_llama4_bare_list_only_as_the_whole_answer():
    calls = [ToolCall("f", {"a": 1}), ToolCall("g", {"b": "x"})]
    for text in ('[f(a=1), g(b="x")]', '  [f(a=1), g(b="x")]\n', '<think>[no]</think>\n[f(a=1), g(b="x")]',
                 '<|python_start|>[f(a=1), g(b="x")]<|python_end|>', "<|python_start|>[f(a=1), g(b='x')]",
                 'Calling: <|python_start|>[f(a=1), g(b="x")]<|python_end|> done.'):
        assert L4.parse_strict(text) == calls, text
        assert detect_format(text) == "llama4_pythonic", text
    for text in ('Sure: [f(a=1)]', '[f(a=1)] and more', '[f(a=1)]<|python_end|>'):
        with pytest.raises(FormatError):
            L4.parse_strict(text)


def test_close_tokens_inside_string_values_are_text():
    for fmt, text, value in (
        (L4, '<|python_start|>[echo(t="<|python_end|>")]<|python_end|>', "<|python_end|>"),
        (LFM2, '<|tool_call_start|>[echo(t="a <|tool_call_end|> b")]<|tool_call_end|>', "a <|tool_call_end|> b"),
        (OLMO3, '<function_calls>echo(t="</function_calls>")</function_calls>', "</function_calls>"),
    ):
        assert fmt.parse_strict(text) == [ToolCall("echo", {"t": value})], fmt.name
        assert detect_format(text) == fmt.name


def test_lfm2_echo_after_the_end_token_is_not_a_call_and_json_mode_is_read():
    echo = '<|tool_call_start|>[f(a=1)]<|tool_call_end|>[f(a=1)]<|tool_call_end|>'
    assert LFM2.parse_strict(echo) == [ToolCall("f", {"a": 1})]
    json_mode = '<|tool_call_start|>[{"name": "f", "arguments": {"a": 1}}]<|tool_call_end|>'
    assert LFM2.parse_strict(json_mode) == [ToolCall("f", {"a": 1})]
    with pytest.raises(FormatError, match="unexpected keys"):
        LFM2.parse_strict('<|tool_call_start|>[{"name": "f", "args": {}}]<|tool_call_end|>')
    with pytest.raises(FormatError, match="without"):
        LFM2.parse_strict("<|tool_call_start|>[f(a=1)]")


def test_olmo3_one_call_per_line():
    text = "<function_calls>\nf(a=1, b=null)\ng(flag=true, off=false)\nh()\n</function_calls>"
    assert OLMO3.parse_strict(text) == [
        ToolCall("f", {"a": 1, "b": None}), ToolCall("g", {"flag": True, "off": False}), ToolCall("h", {})
    ]
    assert OLMO3.render(OLMO3.parse_strict(text)) == "<function_calls>f(a=1, b=None)\ng(flag=True, off=False)\nh()</function_calls>"
    with pytest.raises(FormatError):
        OLMO3.parse_strict("<function_calls>I will call:\nf(a=1)</function_calls>")
    # recovery: prose lines dropped and reported, a call spanning lines kept whole, text after a call dropped
    got = OLMO3.parse_lenient("<function_calls>I'll call it:\nf(a=[1,\n 2], b='x')\ng(c={'k': 'v'}) and that's all\n</function_calls>")
    assert got.calls == [ToolCall("f", {"a": [1, 2], "b": "x"}), ToolCall("g", {"c": {"k": "v"}})]
    assert [p.code for p in got.problems if p.code == "not_a_call"] == ["not_a_call", "not_a_call"]


def test_recovery_of_cut_and_untagged_bodies():
    got = LFM2.parse_lenient('<|tool_call_start|>[f(a=1), g(b="x"), h(')
    assert got.calls == [ToolCall("f", {"a": 1}), ToolCall("g", {"b": "x"}), ToolCall("h", {})] and not got.ok
    got = L4.parse_lenient('<|python_start|>f(a=1)<|python_end|>')
    assert got.calls == [ToolCall("f", {"a": 1})] and not got.ok
    assert LFM2.parse_lenient('[f(a=1)]<|tool_call_end|>').calls == [ToolCall("f", {"a": 1})]
    assert OLMO3.parse_lenient('<function_calls><invoke name="x"></invoke></function_calls>').calls == []


def test_detection_against_toolace():
    assert detect_format('<function_list>[f(a=1)]</function_list>') == "toolace"
    assert detect_format("[Get Weather(city='Paris')]") == "toolace"  # broken bare lists are still toolace's claim
    assert detect_format('[f(a=1)') == "toolace"
    assert detect_format('[f(a=1)]') == "llama4_pythonic"
    assert detect_format('<function_list>[f(a="<|tool_call_start|>")]</function_list>') == "toolace"
    assert detect_format('<|tool_call_start|>[f(a="<function_list>")]<|tool_call_end|>') == "lfm2"
    assert detect_format("[1, 2, 3]") is None and detect_format("(a) [b] {c}") is None


def test_render_refuses_names_python_cannot_call():
    for fmt in (L4, LFM2, OLMO3):
        with pytest.raises(RenderError):
            fmt.render([ToolCall("class", {})])
        with pytest.raises(RenderError):
            fmt.render([ToolCall("get weather", {})])
        calls = [ToolCall("math.sqrt", {"x": 2.0, "not-an-identifier": [1, None]})]
        assert fmt.parse_strict(fmt.render(calls)) == calls


# ----------------------------------------------------------------------------------------------------------------
# A body that lost (or doubled) one character is read whole with it mended (refiner.formats.pythonic_mend.mend_list)

GCD = {s.name: s.params for s in load_tools([
    {"name": "math_gcd", "parameters": {"type": "object", "properties": {
        "num1": {"type": "integer"}, "num2": {"type": "integer"}}}},
    {"name": "slope", "parameters": {"type": "object", "properties": {
        "point1": {"type": "array", "items": {"type": "number"}}, "point2": {"type": "array", "items": {"type": "number"}},
        "unit": {"type": "string"}}}},
    {"name": "get_version", "parameters": {"type": "object", "properties": {}}},
])}


@pytest.mark.parametrize(
    "fmt, text, calls",
    [
        # OLMo 3: the "(" after the tool name lost: the line starts with an offered tool's name glued to a parameter
        (OLMO3, "<function_calls>math_gcdnum1=12, num2=18)\nmath_gcd(num1=81, num2=27)</function_calls>",
         [ToolCall("math_gcd", {"num1": 12, "num2": 18}), ToolCall("math_gcd", {"num1": 81, "num2": 27})]),
        # OLMo 3: a doubled "]" inside a value does not end the call's line (a list of lists is not what the tool takes)
        (OLMO3, '<function_calls>slope(point1=[40.7, -74.0]], point2=[34.0, -118.2], unit="degree")</function_calls>',
         [ToolCall("slope", {"point1": [40.7, -74.0], "point2": [34.0, -118.2], "unit": "degree"})]),
        # OLMo 3: the ")" closing a line's call lost before the next line's call
        (OLMO3, "<function_calls>math_gcd(num1=12, num2=18\nmath_gcd(num1=81, num2=27)</function_calls>",
         [ToolCall("math_gcd", {"num1": 12, "num2": 18}), ToolCall("math_gcd", {"num1": 81, "num2": 27})]),
        # Llama 4: a call without arguments that lost its "("
        (L4, "<|python_start|>[get_version)]<|python_end|>", [ToolCall("get_version", {})]),
        # LFM2: an "=" lost before a constant
        (LFM2, "<|tool_call_start|>[math_gcd(num1=12, num2True)]<|tool_call_end|>",
         [ToolCall("math_gcd", {"num1": 12, "num2": True})]),
        # a string's quote lost in the last call, its close token after it: the list is closed, not cut in the string
        (L4, '<|python_start|>[math_gcd(num1=12), math_gcd(num1=oops", num2=18)]<|python_end|>',
         [ToolCall("math_gcd", {"num1": 12}), ToolCall("math_gcd", {"num1": "oops", "num2": 18})]),
        (LFM2, '<|tool_call_start|>[math_gcd(num1=12), math_gcd(num1="oops, num2=18)]<|tool_call_end|>',
         [ToolCall("math_gcd", {"num1": 12}), ToolCall("math_gcd", {"num1": "oops", "num2": 18})]),
        (OLMO3, '<function_calls>math_gcd(num1=12)\nmath_gcd(num2=18, num1="oops)</function_calls>',
         [ToolCall("math_gcd", {"num1": 12}), ToolCall("math_gcd", {"num2": 18, "num1": "oops"})]),
    ],
)
def test_a_body_that_lost_one_character_is_mended(fmt, text, calls):
    got = fmt.parse_lenient(text, tools=GCD)
    assert got.calls == calls, got.problems
    assert not got.ok


def test_a_glued_line_is_a_call_only_for_an_offered_tool():
    """Without tools (or for a name no tool has) a line like ``math_gcdnum1=12)`` is not taken for a call."""
    text = "<function_calls>math_gcdnum1=12, num2=18)</function_calls>"
    assert OLMO3.parse_lenient(text).calls == []
    assert OLMO3.parse_lenient(text, tools={"other": ["num1"]}).calls == []


# ----------------------------------------------------------------------------------------------------------------
# A misspelt or foreign opening token before the calls is not read as part of them

TWO = [ToolCall("f", {"a": 1}), ToolCall("g", {"b": "x"})]


@pytest.mark.parametrize("opening", ["<functioncalls>", "<function-calls>", "<FUNCTION_CALLS>", "<function_calls",
                                     "[function_calls]", "</function_list>", "<|action_start|><|plugin|>",
                                     '"tool_calls"', "<|python_end|>"])
def test_olmo3_misspelt_or_foreign_opening_token(opening):
    got = OLMO3.parse_lenient(f'{opening}f(a=1)\ng(b="x")</function_calls>')
    assert got.calls == TWO, got.problems
    assert any(p.code == "missing_tag" for p in got.problems)


@pytest.mark.parametrize(
    "fmt, text",
    [
        (L4, '[|python_start|][f(a=1), g(b="x")]<|python_end|>'),
        (L4, '<|pythonstart|>[f(a=1), g(b="x")]<|python_end|>'),
        (L4, '<|python_start|[f(a=1), g(b="x")]<|python_end|>'),
        (L4, '<function=[f(a=1), g(b="x")]<|python_end|>'),
        (LFM2, '[|tool_call_start|][f(a=1), g(b="x")]<|tool_call_end|>'),
        (formats.get("toolace"), '<functionlist>[f(a=1), g(b="x")]</function_list>'),
        (formats.get("toolace"), '<FUNCTION_LIST>[f(a=1), g(b="x")]</function_list>'),
        (formats.get("toolace"), '</func_call>[f(a=1), g(b="x")]</function_list>'),
        (formats.get("toolace"), '"function"[f(a=1), g(b="x")]</function_list>'),
    ],
)
def test_list_after_a_misspelt_or_foreign_opening_token(fmt, text):
    """Before, the token was read as part of the first call's name and the list's items as one item."""
    got = fmt.parse_lenient(text)
    assert got.calls == TWO, got.problems
    assert any(p.code == "missing_tag" for p in got.problems)


def test_text_holding_a_call_before_the_list_is_not_skipped():
    """Only text without a call is skipped to reach the list: ``x(y=[f(a=1)])`` is not the list ``[f(a=1)]``."""
    got = formats.get("toolace").parse_lenient("x(y=[f(a=1)])</function_list>")
    assert [c.name for c in got.calls] == ["x"]


@pytest.mark.parametrize("fmt", [L4, LFM2, formats.get("toolace")], ids=lambda f: f.name)
def test_prose_before_the_list(fmt):
    """A reply, a blank line, then the list (its opening tag missing): the list's calls, named as written. Before,
    the prose was read into the first call's name ('Sure, here they are. [f'). Prose quoting a call inside a
    sentence is not a call."""
    got = fmt.parse_lenient('Sure, here they are.\n\n[f(a=1), g(b="x")]')
    assert got.calls == TWO, got.problems
    got = fmt.parse_lenient("I would have called [f(a=1)] here, but the tool is down.")
    assert got.calls == [], got.calls
    assert any(p.code == "not_a_call" for p in got.problems)
    # a stray '[' before a call's name, with no word before it, is still that call's (misspelt) name
    got = fmt.parse_lenient('[f(a=1), [g(b="x")]')
    assert [c.name for c in got.calls] == ["f", "[g"]


@pytest.mark.parametrize("opening", ["<function=", "]"])
def test_olmo3_opening_glued_to_the_first_name(opening):
    """Another dialect's tag start (``<function=``, Qwen3-Coder's) or a lone bracket glued to the first call."""
    got = OLMO3.parse_lenient(f'{opening}f(a=1)\ng(b="x")</function_calls>')
    assert got.calls == TWO, got.problems


def test_olmo3_stray_bracket_before_the_lines():
    """OLMo 3's opening token written as '[' (no ']' closes it): the lines after it are the calls, all of them."""
    got = OLMO3.parse_lenient('[f(a=1)\ng(b="x")\nf(a=2)</function_calls>')
    assert got.calls == [*TWO, ToolCall("f", {"a": 2})], got.problems


def test_a_doubled_closer_is_read_sooner_than_a_lost_opener_when_types_do_not_tell():
    """``elements=[...]]``: a doubled ']' or a list of lists whose '[' was lost; the tool declares an array without
    item types, so the shallower reading is taken."""
    text = '<|tool_call_start|>[sort_list(elements=["a", "b"]], order="desc"), g(b="x")]<|tool_call_end|>'
    specs = {s.name: s.params for s in load_tools([
        {"name": "sort_list", "parameters": {"type": "object", "properties": {
            "elements": {"type": "array"}, "order": {"type": "string"}}}},
        {"name": "g", "parameters": {"type": "object", "properties": {"b": {"type": "string"}}}}])}
    got = LFM2.parse_lenient(text, tools=specs)
    assert got.calls == [ToolCall("sort_list", {"elements": ["a", "b"], "order": "desc"}), ToolCall("g", {"b": "x"})]


# ---- a lines body read by the fast reader with its separator, against the split path --------------------------

@pytest.mark.parametrize("sep, src, want", [
    (";", 'f(a=1); g(b="x;y")', [ToolCall("f", {"a": 1}), ToolCall("g", {"b": "x;y"})]),
    ("<<function>>", 'f()<<function>>g(b=[1, 2])', [ToolCall("f", {}), ToolCall("g", {"b": [1, 2]})]),
    ("\n", 'f(a=1)\n\ng(b=true)\n', [ToolCall("f", {"a": 1}), ToolCall("g", {"b": True})]),
    ("\n", "f(a=[1,\n 2])", None),  # a call one a line holds no line break
    (";", "f(a=1), g(b=2)", None),  # another separator: the split path decides
    (";", "f(a='x')", None),  # a Python string: the general reader's
])
def test_fast_reader_takes_calls_one_after_another(sep, src, want):
    from refiner.formats.pythonic import fast_call_list
    assert fast_call_list(src, sep) == want


def test_fast_reader_agrees_with_the_split_path_on_random_bodies():
    import random

    from refiner.formats.base import FormatError as Error
    from refiner.formats.pythonic import fast_call_list, strict_call_list
    from refiner.formats.pythonic_sentinels import split_calls

    fmt = formats.get("nexusraven")
    rnd = random.Random(7)
    atoms = ["0", "-1.5e3", "true", "True", "None", '"a;b"', '"x\\"y"', '"<<function>>"', "'s'", "[1,\n 2]", '""']
    read_fast = 0
    for _ in range(3000):
        sep = rnd.choice([";", "<<function>>", "\n"])
        calls = [f"{rnd.choice(['f', 'a.b', 'from'])}({', '.join(f'{k}={rnd.choice(atoms)}' for k in 'ab'[:rnd.randint(0, 2)])})"
                 for _ in range(rnd.randint(0, 3))]
        src = "".join(c + rnd.choice(["", " ", "\n"]) + rnd.choice([sep, sep, ","]) + rnd.choice(["", " ", "\n"])
                      for c in calls).strip().removesuffix(sep).strip()
        fast = fast_call_list(src, sep)
        if fast is None:
            continue
        read_fast += 1
        try:
            slow = strict_call_list(fmt, "[" + ", ".join(filter(None, map(str.strip, split_calls(src, sep)))) + "]", 0)
        except Error:
            slow = None
        assert fast == slow, (sep, src)
    assert read_fast > 300


def _split_one_char_at_a_time(src: str, sep: str) -> list[str]:
    """split_calls' rule read one character at a time: a string runs to its quote on its own line (a backslash
    escapes any character but a line break); a quote no string closes is text, and so is every later quote of its
    kind up to the line's end."""
    pieces, start, i, dead = [], 0, 0, set()
    while i < len(src):
        if src.startswith(sep, i):
            pieces.append(src[start:i])
            i = start = i + len(sep)
            dead = set() if "\n" in sep else dead
            continue
        ch = src[i]
        if ch == "\n":
            dead = set()
        elif ch in "'\"" and ch not in dead:
            j = i + 1
            while j < len(src) and src[j] not in (ch, "\n") and not (src[j] == "\\" and src[j + 1 : j + 2] in ("", "\n")):
                j += 2 if src[j] == "\\" else 1
            if j < len(src) and src[j] == ch:
                i = j + 1
                continue
            dead.add(ch)
        i += 1
    return [*pieces, src[start:]]


def test_split_calls_follows_its_rule_on_random_texts():
    import random

    from refiner.formats.pythonic_sentinels import split_calls

    rnd = random.Random(11)
    for _ in range(20000):
        sep = rnd.choice([";", "; ", "<<f>>", "\n", "\n\n"])
        src = "".join(rnd.choice(["a", ";", " ", '"', "'", "\\", "\n", "<<f>>", "x(", ")"])
                      for _ in range(rnd.randint(0, 14)))
        assert split_calls(src, sep) == _split_one_char_at_a_time(src, sep), (sep, src)
