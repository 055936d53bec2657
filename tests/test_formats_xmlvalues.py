"""Raw-text argument values of the XML dialects (refiner/formats/xmlvalues.py): how a value's text is typed without
specs, how a value is written back, how a tool spec settles it, and the linear tag scanner."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refiner.calls import ToolCall, canonical_json
from refiner.formats.xmlvalues import (
    MAX_UNTAGGED_LINES,
    PY_LITERAL_CHARS,
    Finder,
    followed,
    read_key,
    read_value,
    retype_calls,
    retype_value,
    untagged_lines,
    value_end,
    write_key,
    write_value,
)
from refiner.specs.model import Param

TAGS = ("<parameter=", "</parameter>")


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("42", 42), ("-1.5", -1.5), ("1e+16", 1e16), ("0.1", 0.1), ("100000000000000000000", 10**20),
        ("true", True), ("false", False), ("null", None),
        ('{"a": [1, "x"]}', {"a": [1, "x"]}), ('{"a":1}', {"a": 1}), ("[]", []),
        # a JSON string literal escapes a string that would be misread; a quoted text that needs none stays quoted
        ('"42"', "42"), ('"{\\"a\\": 1}"', '{"a": 1}'), ('"\\"x\\""', '"x"'), ('"a\\u003c/parameter>"', "a</parameter>"),
        ('"machine learning"', '"machine learning"'), ('"a\\nb"', '"a\\nb"'), ('""', '""'),
        # text that is not exactly the template's rendering of a non-string stays the string it is
        ("007", "007"), ("12.50", "12.50"), ("1e3", "1e3"), ("-0", "-0"), (" 5", " 5"), ("5 ", "5 "), ("1,000", "1,000"),
        ("True", "True"), ("nan", "nan"), ("Infinity", "Infinity"), ("1e999", "1e999"), ('{"a": 1', '{"a": 1'),
        ('"unterminated', '"unterminated'), ("", ""), ("Paris", "Paris"), ("[draft] notes", "[draft] notes"),
    ],
)  # fmt: skip
def test_read_value_types_only_what_the_template_writes_for_a_non_string(text, want):
    got = read_value(text, tags=TAGS)
    assert canonical_json(got) == canonical_json(want) and type(got) is type(want)


def test_python_literals_are_read_only_where_the_dialect_writes_them():
    assert read_value("True", python_literals=True) is True
    assert read_value("None", python_literals=True) is None
    # the JSON spellings are text there: the template writes the boolean as True, the string "true" as true (issue
    # 20: a string parameter's true came back as "True"); the spec settles them (retype_value)
    assert read_value("true", python_literals=True) == "true" and read_value("false", python_literals=True) == "false"
    assert read_value('"true"', python_literals=True) == "true"
    assert read_value("null", python_literals=True) is None  # as vLLM's parser reads it
    assert read_value("TRUE", python_literals=True) == "TRUE"
    assert write_value(False, TAGS, python_literals=True) == "False"
    assert write_value(False, TAGS) == "false"


def test_strings_that_would_read_as_something_else_are_written_as_json_strings():
    for s in ["42", "True", "None", "null", '{"a": 1}', "[1]", "-3.5", '"42"', '"\\"x\\""']:
        text = write_value(s, TAGS, python_literals=True)
        assert text.startswith('"') and read_value(text, python_literals=True) == s
    for s in ["Paris", "007", "12.50", "", " spaced ", "a\nb", "<b>bold</b>", '"exact phrase"', '"', '""', "true"]:
        assert write_value(s, TAGS, python_literals=True) == s


def test_a_value_holding_the_dialects_tags_is_written_without_them():
    for s in ["x</parameter>\n<parameter=y>1", "<parameter=a>"]:
        text = write_value(s, TAGS)
        assert not any(t in text for t in TAGS) and read_value(text, tags=TAGS) == s
    text = write_value({"code": "</parameter>"}, TAGS)
    assert "</parameter>" not in text and read_value(text, tags=TAGS) == {"code": "</parameter>"}


def test_non_json_values_raise_for_render_to_report():
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError):
            write_value(bad, TAGS)
    with pytest.raises(TypeError):
        write_value({1, 2}, TAGS)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=15),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.booleans())
def test_write_then_read_gives_the_value_back(value, python_literals):
    text = write_value(value, TAGS, python_literals)
    assert "</parameter>" not in text
    assert canonical_json(read_value(text, python_literals, TAGS)) == canonical_json(value)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12))
def test_keys_round_trip(key):
    plain_ok = ">" not in key and "\n" not in key
    written = write_key(key, plain_ok)
    assert read_key(written) == key
    if not plain_ok:
        assert ">" not in written and "\n" not in written


def test_retype_settles_values_by_the_declared_type_exactly():
    s, i, n = Param(type="string"), Param(type="integer"), Param(type="number")
    assert retype_value(s, 94105) == "94105"
    assert retype_value(s, -1.5) == "-1.5"
    assert retype_value(s, True) == "true" and retype_value(s, True, python_literals=True) == "True"
    assert retype_value(s, None) == "null" and retype_value(Param(type="string", nullable=True), None) is None
    assert retype_value(s, {"a": 1}) == '{"a": 1}'
    assert retype_value(n, "12.50") == 12.5 and retype_value(n, "1e3") == 1000.0
    assert retype_value(i, "1e3") == 1000 and retype_value(i, "12.50") == "12.50"  # not an integer: kept
    assert retype_value(i, "007") == "007" and retype_value(i, "ten") == "ten"
    value = "Paris"
    assert retype_value(Param(type="boolean"), value) is value and retype_value(None, value) is value
    b = Param(type="boolean")  # Qwen3-Coder's true / false (text there) for a boolean parameter
    assert retype_value(b, "true") is True and retype_value(b, "False") is False and retype_value(b, "yes") == "yes"


def test_python_literal_lists_and_objects_are_read_by_the_declared_type():
    """Seed-OSS and Qwen3-Coder write lists and objects with Jinja's ``| string``: Python's repr, read back where the
    spec declares an array or object (as vLLM's parser does with ``ast.literal_eval``), only in those dialects."""
    o, a = Param(type="object"), Param(type="array")
    text = "{'site': 'docs', 'max': 5, 'tags': ('a', None), 'ok': True}"
    assert retype_value(o, text, python_literals=True) == {"site": "docs", "max": 5, "tags": ["a", None], "ok": True}
    assert retype_value(a, "['web', '2024']", python_literals=True) == ["web", "2024"]
    assert retype_value(o, text) == text  # a JSON dialect: the text as written
    # no JSON value, not a literal, too deep for Python's parser, cut, or a list where an object is declared: text
    for param, kept in ((a, "{1, 2}"), (a, "[b'z']"), (a, "[1e999]"), (a, "[f(x)]"), (a, "[" * 300 + "]" * 300),
                        (o, "{'a': 1"), (o, "['a']")):
        assert retype_value(param, kept, python_literals=True) == kept
    # a counted bound on Python's parser (characters given to it): a longer literal stays text, and the calls of
    # one text share the budget
    long = "[" + ", ".join(["'x'"] * (PY_LITERAL_CHARS // 5 + 1)) + "]"
    assert len(long) > PY_LITERAL_CHARS and retype_value(a, long, python_literals=True) == long
    half = "[" + ", ".join(["'x'"] * (PY_LITERAL_CHARS // 10)) + "]"
    assert retype_value(a, half, python_literals=True) == ["x"] * (PY_LITERAL_CHARS // 10)
    call = ToolCall("f", {"p": half, "q": half, "r": half})
    spec = type("Spec", (), {"params": {k: a for k in "pqr"}})()
    (got,) = retype_calls([call], {"f": spec}, python_literals=True)
    assert [type(got.arguments[k]) for k in "pqr"] == [list, list, str]  # the third is past the budget


def test_value_end_skips_quoted_blocks_and_needs_a_structural_follower():
    text = "a </v> b\n<v>inner</v> c</v>\n<k>"
    assert value_end(text, 0, "\n<v>", "</v>", followed("</v>", ("<k>",))) == text.rindex("</v>")
    lost = "Noma\n<v>4</v>\n<end>"  # the first value's closing tag was lost: the next value is inside it
    assert value_end(lost, 0, "\n<v>", "</v>", followed("</v>", ("<k>", "<end>"))) == -1


def test_finder_returns_the_next_hit_and_searches_again_when_asked_behind():
    f = Finder("ab ab ab")
    assert f.next("ab", 0) == 0 and f.next("ab", 1) == 3 and f.next("ab", 4) == 6 and f.next("ab", 7) == -1
    assert f.next("ab", 2) == 3  # a smaller position than last asked: searched again
    assert f.first(("b", "a"), 4) == (4, "b") and f.first(("zz",), 0) == (8, None)


def test_untagged_lines_keep_positions_and_stop_at_the_bound():
    text = "<think>x</think>\n\n name\r\nkey\n\nvalue  \n\n"
    got = untagged_lines(text, len("<think>x</think>"))
    assert [ln for _, _, ln in got] == ["name", "key", "", "value"]
    assert all(text[a:b].removesuffix("\r") == ln for a, b, ln in got)
    assert untagged_lines("a\n" * (MAX_UNTAGGED_LINES + 5), 0) is None
    assert untagged_lines("  \n ", 0) == []
