"""Lenient reading of pythonic call lists (``refiner.formats.pythonic`` + the ``toolace`` format): a quote the model
forgot to escape inside a value is read as part of the value, never as its end, and is reported; a value is never
silently cut short.
"""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats.pythonic import lenient_string, split_top_level, string_end
from refiner.pipeline import Refiner

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
    assert split_top_level("a='x', b='y'", lenient_quotes=True) == ["a='x'", " b='y'"]
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
