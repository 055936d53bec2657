"""Families nobody registered (``tests/invented_families.py``, templates in ``tests/data/invented/``): given the
family's chat template the refiner reads at least 90 % of its call outputs exactly and no call from prose; without
the template, tools offered, the anchored reader (:mod:`refiner.formats.anchored`) alone reads most calls and invents
none; the generic record reader (:mod:`refiner.formats.recorded`) keeps the format contract."""

from __future__ import annotations

import pytest
from invented_families import CALL_CASES, FAMILIES, TOOLS, _norm, invented, measure, outputs

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import base
from refiner.formats.anchored import anchored_calls
from refiner.formats.derive import derive
from refiner.formats.recorded import RecordFormat
from refiner.formats.xmlvalues import retype_calls
from refiner.specs import load_tools

OFFERED = {t["function"]["name"]: list(t["function"]["parameters"]["properties"]) for t in TOOLS}
SPECS = {s.name: s for s in load_tools(TOOLS)}
FULL = tuple(c for case, calls in CALL_CASES if case == "parallel three" for c in calls)
IDS = [f.name for f in FAMILIES]
# Families the anchored reader does not read without their template yet, and why (with it, each is read).
NOT_WITHOUT_TEMPLATE: dict[str, str] = {}
WITHOUT = [pytest.param(f, id=f.name, marks=[pytest.mark.xfail(reason=NOT_WITHOUT_TEMPLATE[f.name], strict=False)]
                        if f.name in NOT_WITHOUT_TEMPLATE else []) for f in FAMILIES]


@pytest.fixture
def scratch_registry(monkeypatch):
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))


@pytest.mark.parametrize("fam", FAMILIES, ids=IDS)
def test_no_grammar_row_holds_the_family_and_the_record_does(fam):
    d = derive(fam.template)
    assert not d.special, (d.why, d.record.missing)
    assert d.record.complete and d.record.missing == []
    if fam.name != "tilde":  # (a name then its JSON arguments: the named_json grammar holds it as a row)
        assert d.from_record and isinstance(d.fmt, RecordFormat)
    assert any("back exactly" in c for c in d.checks)


@pytest.mark.parametrize("fam", FAMILIES, ids=IDS)
def test_given_its_template_at_least_90_percent_read_exactly_and_none_from_prose(fam, scratch_registry):
    r = measure(fam, with_template=True)
    assert r["format"] is not None  # the template's dialect, not detection
    assert r["exact"] >= 0.9 * r["calls_outputs"], r["misses"]
    assert r["from_prose"] == 0 and r["invented"] == 0


@pytest.mark.parametrize("fam", WITHOUT)
def test_without_template_the_anchored_reader_reads_most_calls_and_invents_none(fam):
    exact = total = made_up = 0
    for o in outputs(fam):
        found, notes = anchored_calls(o.text, 0, OFFERED)
        got = retype_calls([f.call for f in found], SPECS)
        made_up += invented(got, o.calls, FULL if o.kind == "broken" else ())
        if o.kind == "prose":
            assert got == [], (o.case, got)
        if o.kind == "call":
            total += 1
            exact += _norm(got) == _norm(o.calls)
            if got:
                assert all(f.how.startswith("anchored on the offered names") for f in found)
    assert made_up == 0
    assert exact > total / 2, (exact, total)


@pytest.mark.parametrize("fam", WITHOUT)
def test_without_template_the_refiner_reads_most_calls_and_invents_none(fam):
    r = measure(fam, with_template=False)
    assert r["exact"] > r["calls_outputs"] / 2 and r["invented"] == 0 and r["from_prose"] == 0, r["misses"]


@pytest.mark.parametrize("fam", WITHOUT)
def test_without_template_a_call_of_one_parameter_is_read(fam):
    """Nothing repeats in such a call to learn the markup from: the anchored reader reads it only when its markup
    closes it (see refiner.formats.anchored._one_key)."""
    r = measure(fam, with_template=False)
    assert not [case for case, _ in r["misses"] if case in ("one string", "after reasoning")], r["misses"]


# one call of one parameter, in markup of shapes none of the families above writes
ONE_KEY = [
    '{{call get_weather}}\ncity -> "Paris"\n{{/call}}',
    'Sure, checking now.\n{{call get_weather}}\ncity -> "Paris"\n{{/call}}',
    "<<tool>> get_weather | city := Paris <</tool>>",
    '```call get_weather\ncity: "Paris"\n```',
    "%%invoke get_weather\n  city = Paris\n%%end",
    "#[call get_weather]\n#[city] Paris\n#[/call]",
    "!!call get_weather\n!!arg city=Paris\n!!end",
]
# prose and documents that name the tool and its parameter in some markup
ONE_KEY_PROSE = [
    "| tool | argument |\n|---|---|\n| get_weather | city: the city |",
    "| get_weather | city: Paris |",
    "Use `get_weather` with `city`: `Paris`.",
    "`get_weather` takes `city`: Paris",
    "## get_weather\n- city: Paris\n## Next",
    "**get_weather** - city: Paris **note**",
    "<b>get_weather</b> needs <i>city</i>: Paris</p>",
    "[get_weather](https://example.org) - city: Paris\n[see also](https://example.org)",
    "> get_weather\n> city: Paris\n>> quoted",
    "(get_weather; city: Paris)",
    "Tools:\n- `get_weather` (city: string)\n- more",
    "**Tool:** get_weather\n**city:** Paris\n**Result:** sunny",
    "=> get_weather\n-- city: Paris\n=> next step is to wait",
    "# get_weather\ncity = Paris\n# end of notes",
    "[get_weather] city: Paris [done]\nThat is what I would do.",
    "<!-- get_weather --> city: Paris <!-- end -->",
    "$$ get_weather\n$ city: Paris\n$$ end",
    "```\nget_weather\ncity: Paris\n```",
    "**get_weather**\ncity: Paris\n**",
    "> get_weather\n> city: Paris",
]


@pytest.mark.parametrize("text", ONE_KEY)
def test_a_closed_call_of_one_parameter_in_new_markup_is_read(text):
    found, notes = anchored_calls(text, 0, {"get_weather": ["city"]})
    assert [f.call for f in found] == [ToolCall("get_weather", {"city": "Paris"})]
    assert "one call of one parameter" in found[0].how and notes


@pytest.mark.parametrize("text", ONE_KEY_PROSE)
def test_prose_naming_a_tool_and_its_one_parameter_is_not_a_call(text):
    assert anchored_calls(text, 0, {"get_weather": ["city"]})[0] == [], text
    assert anchored_calls(text, 0, OFFERED)[0] == [], text


def test_a_call_of_one_parameter_is_not_read_beside_another_name_or_with_prose_after_it():
    offered = {"get_weather": ["city"], "get_time": ["zone"]}
    for text in ("{{call get_weather}}\ncity -> get_time\n{{/call}}",  # another tool's name inside it
                 "{{call get_weather}}\ncity -> Paris\n{{/call}}\n{{call get_weather}}\ncity -> Rome\n{{/call}}",
                 "{{call get_weather}}\ncity -> Paris\n{{/call}}\nThen I will wait for the answer.",
                 "{{call get_weather}}\ncity -> Paris is nice in May\n{{/call}}"):  # more than two unquoted words
        assert [f.call for f in anchored_calls(text, 0, offered)[0]] != [ToolCall("get_weather", {"city": "Paris"})]
    # two calls of one parameter each repeat their markup: read by the literals they share, not by this rule
    two = "{{call get_weather}}\ncity -> Paris\n{{/call}}\n{{call get_weather}}\ncity -> Rome\n{{/call}}"
    assert [f.call.arguments for f in anchored_calls(two, 0, offered)[0]] == [{"city": "Paris"}, {"city": "Rome"}]


def test_the_anchored_reader_reads_no_prose():
    offered = {"get_weather": ["city", "days"]}
    for text in (
        "I will call get_weather with city: Paris, days: 3.",
        "Use get_weather. Options:\n- city: the city\n- days: how many days",
        "get_weather takes a city and days.",
        "To use get_weather, give me a city: Paris or Rome? And days: how many?",
        '{"note": "get_weather", "city": "Paris"}',
    ):
        assert anchored_calls(text, 0, offered)[0] == [], text
    # a key written with no value reads nothing for it (never a guessed value)
    got, _ = anchored_calls("@@tool get_weather\n-- city:\n-- days: 3\n@@done", 0, offered)
    assert [f.call for f in got] == [ToolCall("get_weather", {"days": 3})]


def test_the_anchored_reader_is_used_only_when_no_known_format_reads_a_call():
    from refiner.pipeline import Refiner

    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    out = Refiner().refine({"upstream": text, "tools": TOOLS})
    assert "anchored" not in str(out)
    out = Refiner().refine({"upstream": "%% get_weather\n  city ~> Paris\n  days ~> 3\n%% end", "tools": TOOLS})
    assert out["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]
    assert "anchored on the offered names" in str(out["upstream_diagnostics"])


@pytest.mark.parametrize("fam", FAMILIES, ids=IDS)
def test_the_record_reader_keeps_the_format_contract(fam):
    d = derive(fam.template)
    fmt = d.fmt
    calls = [ToolCall("get_weather", {"city": "Paris", "days": 3}),
             ToolCall("create_event", {"title": "x", "attendees": ["a", "b"], "details": {"k": [1, {"z": None}]}})]
    assert fmt.parse_strict(fmt.render(calls)) == calls
    for text in ("", "prose only", fmt.render(calls)[:-5], fmt.render(calls)[:17], "\x00" * 50, "{" * 5000,
                 (fmt.render(calls) + "\n") * 300):
        got = fmt.parse_lenient(text, tools=OFFERED)
        assert isinstance(got, base.Lenient)
        try:
            fmt.parse_strict(text)
        except formats.FormatError:
            pass
    with pytest.raises(formats.RenderError):
        fmt.render([ToolCall("f", {"x": float("nan")})])


@pytest.mark.parametrize("fam", FAMILIES, ids=IDS)
def test_the_new_readers_read_200_kb_storms_well_formed(fam):
    """Their time is measured by benchmarks/bench_worst_case.py (these readers are among its entry points)."""
    d = derive(fam.template)
    unit = d.fmt.render([ToolCall("get_weather", {"city": "Paris", "days": 3})])
    texts = [(unit + "\n") * (200_000 // (len(unit) + 1)), unit[: len(unit) // 2] * (200_000 // len(unit) * 2),
             "get_weather city: " * 11_000, ("@@tool get_weather\n-- city: " + "x" * 50 + "\n") * 2500,
             '"get_weather"' + "{" * 199_000]
    for text in texts:
        text = text[:200_000]
        got = d.fmt.parse_lenient(text, tools=OFFERED)
        assert not [p for p in got.problems if p.code == "internal"], got.problems[:3]
        assert all(c.name == "get_weather" for c in got.calls)
        found, _ = anchored_calls(text, 0, OFFERED)
        assert all(a.call.name == "get_weather" for a in found)


# a family whose argument line says its value's type (an attribute no grammar here spells): given the template only
TYPED = """{%- for m in messages %}{% if m.role == 'user' %}Q: {{ m.content }}
{% elif m.role == 'assistant' %}A: {{ m.content }}{% for tc in m.tool_calls or [] %}[call {{ tc.function.name }}]
{% for k, v in tc.function.arguments.items() %}{{ k }} ({{ 'str' if v is string else 'json' }}) = {{ v if v is string else v | tojson }}
{% endfor %}[end call]
{% endfor %}
{% endif %}{% endfor %}"""


def test_a_typing_attribute_of_its_own_is_derived_and_read(tmp_path, scratch_registry):
    from refiner.pipeline import Refiner

    path = tmp_path / "typed.jinja"
    path.write_text(TYPED, encoding="utf-8")
    d = derive(path)
    assert d.from_record and d.record.key_suffix == " (str) = " and d.record.key_suffix_typed == " (json) = "
    calls = [ToolCall("set_zip", {"zip": "94105", "note": "true"}), ToolCall("get_weather", {"city": "Oslo", "days": 3})]
    text = d.fmt.render(calls)
    assert "zip (str) = 94105" in text and "days (json) = 3" in text
    assert d.fmt.parse_strict(text) == calls  # the attribute types the value: "94105" and "true" stay strings
    r = Refiner(chat_template=path)
    assert r.refine({"upstream": text, "tools": TOOLS})["calls"] == [
        {"name": c.name, "arguments": dict(c.arguments)} for c in calls]


def test_what_the_three_newest_families_need_is_in_the_record():
    """quill: a quote token around strings, keys bare; idcall: the call id between the name and the arguments;
    wrapped: each call object under a key of an outer object that is not the tool name."""
    from invented_families import HERE

    quill = derive(HERE / "quill.jinja").record
    assert (quill.quote_open, quill.quote_close, quill.strings, quill.literals) == ('~"', '"~', "quoted", "json")
    idcall = derive(HERE / "idcall.jinja").record
    assert (idcall.shape, idcall.name_suffix, idcall.id_position, idcall.id_suffix) == (
        "json_args", " @", "after_name", " :: ")
    wrapped = derive(HERE / "wrapped.jinja")
    r = wrapped.record
    assert (r.wrapper, r.wrapper_fields, r.name_key, r.args_key, r.id_key, r.id_position) == (
        "step", {"kind": "call"}, "tool", "input", "ref", "wrapper_key")
    text = wrapped.fmt.render([ToolCall("get_weather", {"city": "Paris"})])
    assert '"step": {"tool": "get_weather", "input": {"city": "Paris"}}' in text
    # a quote token the value holds cannot be written; one cut before it closes is a cut
    q = derive(HERE / "quill.jinja").fmt
    with pytest.raises(formats.RenderError):
        q.render([ToolCall("set_zip", {"zip": 'a"~b'})])
    assert q.parse_lenient('<<run set_zip>> zip => ~"101').calls in ([], [ToolCall("set_zip", {})])
