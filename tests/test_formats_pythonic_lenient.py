"""Lenient reading of pythonic call lists (``refiner.formats.pythonic`` + the ``toolace`` format): a quote the model
forgot to escape inside a value is read as part of the value, never as its end, and is reported; a value is never
silently cut short.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats.pythonic import lenient_string
from refiner.formats.pythonic_scan import matching_paren, open_brackets, split_top_level, string_end
from refiner.pipeline import Refiner
from refiner.specs import load_tools

FIELD_REPORT = "[bash(command='sed -n '360,450p' /testbed/f.py')]"


def test_field_report_unescaped_quote_in_a_single_quoted_value():
    """Reported from the field: the value was cut to "sed -n '360" (the rest dropped as an argument without a
    name). It runs to the quote that closes the call, and the unescaped quotes are reported."""
    got = formats.get("toolace").parse_lenient(FIELD_REPORT)
    assert got.calls == [ToolCall("bash", {"command": "sed -n '360,450p' /testbed/f.py"})]
    reported = [p for p in got.problems if p.code == "bad_argument"]
    assert reported and "not escaped" in reported[0].message and "command" in reported[0].message
    assert formats.detect_format(FIELD_REPORT) == "toolace"
    res = Refiner().refine({"upstream": FIELD_REPORT})
    assert res["calls"] == [{"name": "bash", "arguments": {"command": "sed -n '360,450p' /testbed/f.py"}}]
    refined = formats.get("toolace").parse_strict(res["refined"])
    assert refined[0].arguments["command"] == "sed -n '360,450p' /testbed/f.py"


@pytest.mark.parametrize(
    "text, calls",
    [
        ("<function_list>[bash(command='sed -n '360,450p' /testbed/f.py'), ls(path='/tmp')]</function_list>",
         [ToolCall("bash", {"command": "sed -n '360,450p' /testbed/f.py"}), ToolCall("ls", {"path": "/tmp"})]),
        ("[say(text='it's here', lang='en')]", [ToolCall("say", {"text": "it's here", "lang": "en"})]),
        ('[grep(pattern="say "hi" now", path=".")]', [ToolCall("grep", {"pattern": 'say "hi" now', "path": "."})]),
        ("[f(a='x', b='y')]", [ToolCall("f", {"a": "x", "b": "y"})]),  # (ordinary quotes read as before)
        ("[f(a='don\\'t', b=1)]", [ToolCall("f", {"a": "don't", "b": 1})]),  # an escaped quote stays escaped
        ("[f(q='a, b', n=2), g(x='c)d')]", [ToolCall("f", {"q": "a, b", "n": 2}), ToolCall("g", {"x": "c)d"})]),
    ],
)
def test_values_holding_their_own_quotes(text, calls):
    got = formats.get("toolace").parse_lenient(text)
    assert got.calls == calls, got.problems


def test_an_ambiguous_quote_ends_where_python_would_end_it():
    """``a='x', b='y'`` could be one value ``x', b='y`` only if the model wrote it so; the first quote that may end a
    value ends it (the reading Python gives a well-formed text)."""
    assert split_top_level("a='x', b='y'") == ["a='x'", " b='y'"]
    assert string_end("'x', b='y'", 0, lenient_quotes=True) == 3


def test_lenient_string_reads_escapes_and_says_when_quotes_were_not_escaped():
    assert lenient_string("'it's'") == ("it's", True)
    assert lenient_string("'tab\\there'") == ("tab\there", False)
    assert lenient_string('"a\\"b"') == ('a"b', False)
    assert lenient_string("'open") is None and lenient_string("1") is None and lenient_string("'a', 'b'") is None


def test_a_value_is_never_silently_cut():
    """Whatever the quoting, every character of a value that is read is in the value, or a problem says what was
    dropped."""
    fmt = formats.get("toolace")
    for text in ["[f(a='x'y'z')]", "[f(a=''''')]", "[f(a='x\"y', b=\"p'q\")]", "[f(a='1', '2')]", "[f(a='x' 'y')]"]:
        got = fmt.parse_lenient(text)
        kept = "".join(str(v) for c in got.calls for v in c.arguments.values())
        dropped = " ".join(p.message for p in got.problems if p.code in ("bad_argument", "unreadable", "not_a_call"))
        for piece in ("x", "y", "z", "p", "q", "1", "2"):
            if piece in text:
                assert piece in kept or piece in dropped, (text, got.calls, got.problems)


# ----------------------------------------------------------------------------------------------------------------
# A list that lost (or doubled) one character: read whole with it mended, settled by the tools when in doubt

TRIANGLE = {"calculate_triangle_area": {"base": None, "height": None, "unit": None}}
TOOLS_TRIANGLE = [
    {"name": "calculate_triangle_area", "parameters": {"type": "object", "properties": {
        "base": {"type": "integer"}, "height": {"type": "integer"}, "unit": {"type": "string"}}}},
    {"name": "run_ttest", "parameters": {"type": "object", "properties": {
        "group1": {"type": "array", "items": {"type": "integer"}},
        "group2": {"type": "array", "items": {"type": "integer"}}}}},
    {"name": "math_gcd", "parameters": {"type": "object", "properties": {
        "num1": {"type": "integer"}, "num2": {"type": "integer"}}}},
]


@pytest.mark.parametrize(
    "body, calls",
    [
        # a comma lost between two arguments, and between two calls
        ('[area(radius=10 units="meters")]', [ToolCall("area", {"radius": 10, "units": "meters"})]),
        ('[f(a=1) g(b="x")]', [ToolCall("f", {"a": 1}), ToolCall("g", {"b": "x"})]),
        # the quote opening or closing a value
        ('[derive(function=2x**2", value=1, variable="x")]',
         [ToolCall("derive", {"function": "2x**2", "value": 1, "variable": "x"})]),
        ('[paint(color="Red, background="white")]', [ToolCall("paint", {"color": "Red", "background": "white"})]),
        ('[area(base=6, unit="square meters)]', [ToolCall("area", {"base": 6, "unit": "square meters"})]),
        # "=" before a constant, a string or a list: only one split reads
        ('[proteins(compartment="membrane", include_descriptionTrue)]',
         [ToolCall("proteins", {"compartment": "membrane", "include_description": True})]),
        ('[find(location"England", year=1800)]', [ToolCall("find", {"location": "England", "year": 1800})]),
        # an opening bracket of a list or a dict, the ')' closing a call before the next one
        ("[ttest(group1=[3, 4], group2=7, 8], equal=True)]",
         [ToolCall("ttest", {"group1": [3, 4], "group2": [7, 8], "equal": True})]),
        ('[query(conditions=["field": "age"}, {"field": "job"}])]',
         [ToolCall("query", {"conditions": [{"field": "age"}, {"field": "job"}]})]),
        ('[temp(city="Boston, USA", days=10, humidity(city="Rome", days=10)]',
         [ToolCall("temp", {"city": "Boston, USA", "days": 10}), ToolCall("humidity", {"city": "Rome", "days": 10})]),
        # a ':' inside a dict value
        ('[query(where={"field" "age"})]', [ToolCall("query", {"where": {"field": "age"}})]),
    ],
)
def test_one_lost_character_is_mended(body, calls):
    text = f"<function_list>{body}</function_list>"
    got = formats.get("toolace").parse_lenient(text)
    assert got.calls == calls, (text, got.problems)
    assert any("broken call list read whole" in p.message for p in got.problems)


@pytest.mark.parametrize(
    "body, calls",
    [
        # "base10": base=10 or base1=0; only "base" is a parameter
        ('[calculate_triangle_area(base10, height=5, unit="units")]',
         [ToolCall("calculate_triangle_area", {"base": 10, "height": 5, "unit": "units"})]),
        # "math_gcdnum1=12": the '(' goes after the offered tool's name
        ("[math_gcdnum1=12, num2=18)]", [ToolCall("math_gcd", {"num1": 12, "num2": 18})]),
        # "[3, 4]]": a doubled ']' or a lost '[' (a list of lists); the parameter takes integers
        ("[run_ttest(group1=[3, 4]], group2=[7, 8])]", [ToolCall("run_ttest", {"group1": [3, 4], "group2": [7, 8]})]),
        # a lost closing quote: one value, or two arguments; "days" is a parameter of the tool
    ],
)
def test_the_tools_settle_which_mended_reading_is_meant(body, calls):
    """Where several edits read, the tools choose: names and parameters offered, values of their declared types.
    Without tools such a list is not mended (the argument in doubt is dropped and reported, as before)."""
    specs = {s.name: s.params for s in load_tools(TOOLS_TRIANGLE)}
    fmt = formats.get("toolace")
    text = f"<function_list>{body}</function_list>"
    assert fmt.parse_lenient(text, tools=specs).calls == calls
    assert fmt.parse_lenient(text).calls != calls
    res = Refiner().refine({"tools": TOOLS_TRIANGLE, "upstream": text, "format": "toolace"})
    assert fmt.parse_strict(res["refined"]) == calls


def test_a_mended_reading_is_taken_only_when_the_edits_agree():
    """``city="Boston, USA, days=10)`` lost a quote: after "USA" (two arguments) or before ")" (one value). Without
    the tools both read, and neither is taken; with them, the reading whose parameters are all offered and that
    reads the most arguments."""
    fmt = formats.get("toolace")
    text = '<function_list>[forecast(city="Boston, USA, days=10)]</function_list>'
    assert fmt.parse_lenient(text).calls != [ToolCall("forecast", {"city": "Boston, USA", "days": 10})]
    tools = {"forecast": ["city", "days"]}
    assert fmt.parse_lenient(text, tools=tools).calls == [ToolCall("forecast", {"city": "Boston, USA", "days": 10})]


@pytest.mark.parametrize(
    "text",
    [
        '<function_list>[f(a=1), g(b="x',  # the text stops inside a string
        "<function_list>[f(a=1), g(b=[1, 2]",  # inside a list value
        "<function_list>[f(a=1), g(b=2",  # after a number
        '<function_list>[f(a=1), g(b="x)]',  # inside a string (or a quote lost: the text does not say)
    ],
)
def test_a_text_that_stops_is_not_mended_into_a_whole_list(text):
    """Without its closing tag, a list whose end is not its own ']' is a text that stops: it is never mended into
    a whole list (the call it stops in is marked as cut)."""
    got = formats.get("toolace").parse_lenient(text, tools={"f": ["a"], "g": ["b"]})
    assert not any("broken call list read whole" in p.message for p in got.problems)
    assert got.cut is not None and got.cut.index == 1


@pytest.mark.parametrize(
    "text, calls",
    [
        ("<function_list>[f(a=1), g(city='Paris' unit='c')]</function_list>",
         [ToolCall("f", {"a": 1}), ToolCall("g", {"city": "Paris", "unit": "c"})]),
        ("<function_list>[g(city'Paris', unit='c')]</function_list>", [ToolCall("g", {"city": "Paris", "unit": "c"})]),
        ("<function_list>[g(city='Paris, unit='c')]</function_list>", [ToolCall("g", {"city": "Paris", "unit": "c"})]),
    ],
)
def test_a_single_quoted_list_is_mended_too(text, calls):
    """Pythonic dialects often quote with single quotes; a list quoted so throughout is mended like the plain
    layout (with its quotes swapped, which reads every string the same)."""
    got = formats.get("toolace").parse_lenient(text, tools={"f": ["a"], "g": ["city", "unit"]})
    assert got.calls == calls, got.problems
    assert any(p.code == "mended" for p in got.problems)


@pytest.mark.parametrize(
    "body, args",
    [
        ("[f(a=1, b=], c=0.0)]", {"a": 1, "b": [], "c": 0.0}),  # an empty list's '['
        ("[f(a=1, b=[, c=[])]", {"a": 1, "b": [], "c": []}),  # ... or its ']'
        ('[f(a="x /FI \\"IMAGE\\")]', {"a": 'x /FI "IMAGE"'}),  # the closing quote after an escaped one
        ('[f(a=", b="NY")]', {"a": "", "b": "NY"}),  # one quote of an empty string
    ],
)
def test_empty_values_and_escaped_quotes_are_mended(body, args):
    got = formats.get("toolace").parse_lenient(f"<function_list>{body}</function_list>")
    assert got.calls == [ToolCall("f", args)], got.problems


# Issue 20: values the model wrote otherwise than Python and JSON read them, in the layouts LFM2's chat template
# writes (single-quoted strings, embedded quotes escaped) and Llama 4 / ToolACE write (double quotes).
DATE_TOOLS = load_tools([
    {"name": "set_date", "parameters": {"type": "object", "properties": {
        "month": {"type": "integer"}, "day": {"type": "integer"}, "zip": {"type": "string"}}}},
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}},
    {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}},
])
OFFERED = {t.name: t.params for t in DATE_TOOLS}
PYTHONIC = ("toolace", "lfm2", "llama4_pythonic", "olmo3")


def _wrap(fmt: str, calls: str) -> str:
    f = formats.get(fmt)
    if fmt == "olmo3":
        return f.tags[0] + calls + f.tags[1]
    return f.tags[0] + "[" + calls + "]" + f.tags[1]


def _bad(got) -> list[str]:
    return [p.message for p in got.problems if p.code == "bad_argument"]


@pytest.mark.parametrize("fmt", PYTHONIC)
def test_leading_zeros_are_read_as_the_integer_and_reported(fmt):
    got = formats.get(fmt).parse_lenient(_wrap(fmt, "set_date(month=07, day=05)"), tools=OFFERED)
    assert got.calls == [ToolCall("set_date", {"month": 7, "day": 5})]
    assert sum("leading zeros" in m for m in _bad(got)) == 2
    # a parameter declared as a string keeps the text as written (a zip code)
    got = formats.get(fmt).parse_lenient(_wrap(fmt, "set_date(zip=07030, day=05)"), tools=OFFERED)
    assert got.calls == [ToolCall("set_date", {"zip": "07030", "day": 5})]


@pytest.mark.parametrize("fmt", PYTHONIC)
def test_an_argument_without_a_value_is_dropped_never_an_empty_string(fmt):
    for body, want in [("get_weather(city=)", {}), ("get_weather(city=, unit='c')", {"unit": "c"}),
                       ("get_weather(unit='c', city=)", {"unit": "c"})]:
        got = formats.get(fmt).parse_lenient(_wrap(fmt, body))
        assert got.calls == [ToolCall("get_weather", want)], body
        assert any("'city' has no value" in m for m in _bad(got)), body


@pytest.mark.parametrize("fmt", PYTHONIC)
def test_values_json_cannot_hold_are_reported(fmt):
    got = formats.get(fmt).parse_lenient(_wrap(fmt, "set_date(day=1e999, month=3)"))
    assert got.calls == [ToolCall("set_date", {"month": 3})]  # no JSON number holds 1e999: dropped, not "1e999"
    assert any("'day' dropped" in m and "1e999" in m for m in _bad(got))
    got = formats.get(fmt).parse_lenient(_wrap(fmt, "set_date(day=-1e999, month=3)"))
    assert got.calls == [ToolCall("set_date", {"month": 3})] and _bad(got)
    got = formats.get(fmt).parse_lenient(_wrap(fmt, "bash(command=b'ls -la')"))
    assert got.calls == [ToolCall("bash", {"command": "ls -la"})]
    assert any("bytes literal b'ls -la'" in m for m in _bad(got))
    with pytest.raises(formats.FormatError, match="out of range"):
        formats.get(fmt).parse_strict(_wrap(fmt, "set_date(day=1e999)"))


@pytest.mark.parametrize("fmt", PYTHONIC)
def test_positional_values_take_the_offered_tools_parameters_in_declared_order(fmt):
    """LFM2 writes ``get_weather('Paris', unit='celsius')``: with the tools known 'Paris' is the city (the first
    declared parameter), reported; without them it is dropped and reported (nothing is guessed)."""
    f = formats.get(fmt)
    text = _wrap(fmt, "get_weather('Paris', unit='celsius')")
    got = f.parse_lenient(text, tools=OFFERED)
    assert got.calls == [ToolCall("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert any("read as city" in m for m in _bad(got))
    got = f.parse_lenient(_wrap(fmt, "get_weather('Paris', 'celsius')"), tools=OFFERED)
    assert got.calls == [ToolCall("get_weather", {"city": "Paris", "unit": "celsius"})]
    unknown = f.parse_lenient(text)
    assert unknown.calls == [ToolCall("get_weather", {"unit": "celsius"})]
    assert any("positional" in m and "dropped" in m for m in _bad(unknown))
    for body in ("get_weather('Paris', city='Rome')",  # the parameter given twice
                 "get_weather('Paris', 'celsius', 'extra')",  # more values than parameters
                 "lookup('Paris')"):  # a tool that is not offered
        got = f.parse_lenient(_wrap(fmt, body), tools=OFFERED)
        assert "Paris" not in str([c.arguments for c in got.calls]), body
        assert any("positional" in m and "dropped" in m for m in _bad(got)), body


def test_positional_values_through_the_pipeline():
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}}}]
    text = "<|tool_call_start|>[get_weather('Paris', unit='celsius')]<|tool_call_end|>"
    res = Refiner().refine({"upstream": text, "tools": tools})
    assert res["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]


@pytest.mark.parametrize("fmt", PYTHONIC)
@pytest.mark.parametrize(
    "literal, command",
    [
        (r'''"echo \"hi there\" > out.txt"''', 'echo "hi there" > out.txt'),
        (r"""'grep -r \'def main\' src/ | sed \'s/, /\\t/g\''""", r"grep -r 'def main' src/ | sed 's/, /\t/g'"),
        (r'''"bash -c \"echo \\\"nested, (quoted)\\\"\""''', r'bash -c "echo \"nested, (quoted)\""'),
        (r'''"find . -name \"*.py\" | xargs grep \"def \""''', 'find . -name "*.py" | xargs grep "def "'),
    ],
)
def test_a_shell_command_with_escaped_quotes_reads_whole(fmt, literal, command):
    f = formats.get(fmt)
    for body in (f"bash(command={literal})", f"bash(command={literal}), set_date(month=07)"):
        got = f.parse_lenient(_wrap(fmt, body) if fmt != "olmo3" else _wrap(fmt, body.replace("), ", ")\n")))
        assert got.calls[0] == ToolCall("bash", {"command": command}), body
    cut = f.parse_lenient(_wrap(fmt, f"bash(command={literal}").removesuffix(f.tags[1]).removesuffix("]"))
    assert cut.calls == [ToolCall("bash", {"command": command})]


def _python_string_end(src: str, i: int) -> int:
    """The index after the string whose quote is ``src[i]`` as Python reads it (a backslash escapes the next
    character), a character at a time; -1 when it is not closed."""
    j = i + 1
    while j < len(src):
        if src[j] == "\\":
            j += 2
        elif src[j] == src[i]:
            return j + 1
        else:
            j += 1
    return -1


def _brackets_one_by_one(src: str) -> tuple[int, bool]:
    """open_brackets' answer found a character at a time: a quote starts a lenient string (string_end) until one of
    its kind closes none, then strings of that kind as Python reads them; a quote that closes no string ends it."""
    lenient, depth, i = {'"': True, "'": True}, 0, 0
    while i < len(src):
        ch = src[i]
        if ch in lenient:
            if lenient[ch]:
                j = string_end(src, i, lenient_quotes=True)
                if j < 0 or src[j - 1] != ch:
                    lenient[ch] = False
                    continue
            else:
                j = _python_string_end(src, i)
                if j < 0:
                    return depth, True
            i = j
            continue
        depth = depth + 1 if ch in "([{" else max(depth - 1, 0) if ch in ")]}" else depth
        i += 1
    return depth, False


@given(st.text(alphabet=list("\"'()[]{},: \\\na"), max_size=30))
def test_open_brackets_reads_as_one_character_at_a_time(src):
    assert open_brackets(src) == _brackets_one_by_one(src)


# Texts for the readers' one-character references: quote runs, escapes, brackets, commas and what may follow a value.
_PIECES = ['"', '"', "'", "'", '""', "''", "\\", "(", ")", "[", "]", "{", ",", ":", " ", "\n", "a", "="]


def _random_texts(seed: int, n: int) -> list[str]:
    import random

    rnd = random.Random(seed)
    return ["".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 24))) for _ in range(n)]


def test_open_brackets_reads_quote_runs_as_one_character_at_a_time():
    for src in _random_texts(5, 20000):
        assert open_brackets(src) == _brackets_one_by_one(src), src


def _closer_one_by_one(src: str, at: int) -> int:
    """matching_paren's answer found a character at a time: strings as Python reads them; a closer closes the last
    bracket left open; a string not closed ends the search (``len(src)``)."""
    opened, i = [], at
    while i < len(src):
        ch = src[i]
        if ch in "'\"":
            i = _python_string_end(src, i)
            if i < 0:
                return len(src)
            continue
        if ch in "([{":
            opened.append(i)
        elif ch in ")]}" and opened:
            opened.pop()
            if not opened:
                return i
        i += 1
    return len(src)


def test_matching_paren_reads_as_one_character_at_a_time():
    for src in _random_texts(6, 20000):
        src = "(" + src
        assert matching_paren(src, 0) == _closer_one_by_one(src, 0), src


@pytest.mark.parametrize("src, expected", [
    ('f(a="x, b=1', (1, True)),  # no quote of its kind closes it, leniently or not
    ('f(a="x", b="{"{"{', (2, True)),  # no '"' may close a lenient string: read as Python reads it
    ("f(a='it's', b=[1", (2, False)),  # an unescaped quote inside a leniently read string
    ('f(a="(", b=\'[\')', (0, False)),
])
def test_open_brackets_at_the_end_of_a_text(src, expected):
    assert open_brackets(src) == expected == _brackets_one_by_one(src)
