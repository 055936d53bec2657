"""Deriving a family's dialect from its chat template (``refiner.formats.derive``, ``tool-refiner formats derive``,
``Refiner(chat_template=)``).

The templates in ``tests/corpus/templates/`` are written for these tests, each in one family's layout (the layout is
the family's chat template's, the text our own). For each family with a registered row, the derived row must read the
family's corpus (``tests/corpus/dialects/``, and canitoolcall's fixtures of that family when it is installed) exactly
as the registered row does.
"""

from __future__ import annotations

import importlib
import json
import pickle
from pathlib import Path

import pytest
from dialect_corpus import load as load_corpus
from typer.testing import CliRunner

from refiner import formats
from refiner.calls import ToolCall
from refiner.cli import app
from refiner.formats.brace_kv import BraceKV
from refiner.formats.derive import TemplateFailure, derive, install
from refiner.formats.derive.diff import inserted
from refiner.formats.derive.record import NAMES
from refiner.formats.derive.render import MAX_STEPS, load_template
from refiner.formats.json_calls import JsonCalls
from refiner.formats.named_json import NamedJson
from refiner.formats.xml_grammar import XmlParams
from refiner.pipeline import Refiner

TEMPLATES = Path(__file__).resolve().parent / "corpus" / "templates"
# template -> the registered row of its family, and the canitoolcall fixture family it writes (None: none)
ROWS = {
    "glm45.jinja": ("glm45", "glm"),
    "qwen3_coder.jinja": ("qwen3_coder", "qwen3-xml"),
    "jamba.jinja": ("jamba", None),
    "hermes.jinja": ("hermes", "qwen3-hermes"),
    "minimax_m2.jinja": ("minimax_m2", None),
    "seed_oss.jinja": ("seed_oss", None),
    "deepseek_v32.jinja": ("deepseek_v32", "deepseek"),
    "gemma4.jinja": ("gemma4", "gemma4"),
    "functiongemma.jinja": ("functiongemma", None),
}


def _fixtures(family: str | None) -> list[str]:
    if family is None:
        return []
    try:
        from canitoolcall.fixtures import default_fixtures_dir
    except ImportError:
        return []
    texts = []
    for path in sorted((default_fixtures_dir() / family).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.append(json.loads(line)["raw_output"])
    return texts


def _strict(fmt, text):
    try:
        return fmt.parse_strict(text)
    except formats.FormatError:
        return "FormatError"


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


@pytest.mark.parametrize("template", sorted(ROWS))
def test_derived_row_reads_the_family_corpus_as_the_registered_row(template, corpus):
    registered, fixture_family = ROWS[template]
    d = derive(TEMPLATES / template)
    assert not d.special, d.why
    reg = formats.get(registered)
    texts = [r.text for r in corpus if r.format == registered] + _fixtures(fixture_family)
    assert len(texts) >= 5
    if fixture_family == "deepseek":  # one family, several dialects: the DSML V3.2 texts are this row's
        texts = [t for t in texts if "｜DSML｜function_calls" in t]
    for text in texts:
        assert _strict(d.fmt, text) == _strict(reg, text), text[:200]
        assert d.fmt.parse_lenient(text).calls == reg.parse_lenient(text).calls, text[:200]


@pytest.mark.parametrize(
    ("template", "grammar", "same_as"),
    [
        ("glm45.jinja", XmlParams, "glm45"),
        ("qwen3_coder.jinja", XmlParams, "qwen3_coder"),
        ("jamba.jinja", JsonCalls, "jamba"),
        ("minimax_m2.jinja", XmlParams, "minimax_m2"),
        ("seed_oss.jinja", XmlParams, "seed_oss"),
        ("deepseek_v32.jinja", XmlParams, "deepseek_v32"),
        ("gemma4.jinja", BraceKV, "gemma4"),
        ("functiongemma.jinja", BraceKV, "functiongemma"),
        ("hermes.jinja", JsonCalls, "hermes"),  # the row's reading policies (respell, untagged) aside
    ],
)
def test_derivation_lands_on_the_grammar_and_the_builtin_spelling(template, grammar, same_as):
    d = derive(TEMPLATES / template)
    assert isinstance(d.fmt, grammar)
    assert d.same_as == same_as
    # the row is not registered by derivation, and it reads what the template writes
    assert d.fmt.name not in formats.names() or d.fmt.name == same_as
    calls = d.fmt.parse_strict(d.record.sections["two"])
    assert [c.name for c in calls] == list(NAMES[:2])
    assert any("reads the template's render" in c for c in d.checks)


def test_the_markers_of_each_layout():
    qwen = derive(TEMPLATES / "qwen3_coder.jinja")
    s = qwen.fmt.spelling
    assert (s.section_open, s.call_open, s.key_open, s.value_close, s.call_close, s.section_close) == (
        "<tool_call>", "<function=", "<parameter=", "</parameter>", "</function>", "</tool_call>")
    assert s.section_per_call and s.strip_newline and s.typing == "python"  # Jinja's | string writes True
    glm = derive(TEMPLATES / "glm45.jinja").fmt.spelling
    assert (glm.name_at, glm.key_at, glm.key_open, glm.key_close, glm.value_open) == (
        "text", "element", "<arg_key>", "</arg_key>", "<arg_value>")
    mm = derive(TEMPLATES / "minimax_m2.jinja")
    assert (mm.fmt.spelling.section_open, mm.fmt.spelling.call_open, mm.fmt.spelling.name_at) == (
        "<minimax:tool_call>", "<invoke ", "attr")
    assert mm.record.opener == '<invoke name="' and mm.record.key_suffix == '">'
    hermes = derive(TEMPLATES / "hermes.jinja")
    assert (hermes.fmt.spelling.open, hermes.fmt.spelling.close, hermes.fmt.spelling.payload) == (
        "<tool_call>", "</tool_call>", "object")
    assert (hermes.record.reasoning_start.strip(), hermes.record.reasoning_end.strip()) == ("<think>", "</think>")
    assert hermes.fmt.reasoning == (("<think>", "</think>"),)
    gemma = derive(TEMPLATES / "gemma4.jinja")  # a quote token around strings, containers with bare keys
    assert (gemma.record.quote_open, gemma.record.quote_close, gemma.record.literals) == ('<|"|>', '<|"|>', "quoted")
    assert (gemma.fmt.spelling.call_open, gemma.fmt.spelling.call_close, gemma.fmt.spelling.keyword) == (
        "<|tool_call>", "<tool_call|>", "call:")


def test_name_then_json_arguments_maps_onto_the_named_json_grammar():
    d = derive(TEMPLATES / "deepseek_v31.jinja")
    assert not d.special, d.why
    assert isinstance(d.fmt, NamedJson) and d.record.shape == "json_args"
    sp = d.fmt.spelling
    assert (sp.section_open, sp.call_open, sp.name_close, sp.call_close, sp.section_close) == (
        "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>")
    # the hand-written module reads and writes these calls as the template does: the refiner uses it
    assert d.read_by == ["deepseek_v31"] and d.writes_as == ["deepseek_v31"] and install(d) == "deepseek_v31"
    calls = d.fmt.parse_strict('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}'
                               '<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    assert calls == [ToolCall("get_weather", {"city": "Paris"})]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


CALL_LOOP = (
    "{% for m in messages %}{% if m.role == 'assistant' %}{% for tc in m.tool_calls or [] %}"
    "{BODY}{% endfor %}{% else %}{{ m.content }}{% endif %}{% endfor %}"
)


# a DSML-like layout: a string="true|false" attribute on every parameter tag
DSML_LAYOUT = CALL_LOOP.replace("{BODY}", (
    '<|calls|><invoke name="{{ tc.function.name }}">{% for k, v in tc.function.arguments.items() %}'
    '<parameter name="{{ k }}" string="{{ "true" if v is string else "false" }}">'
    '{{ v if v is string else v | tojson }}</parameter>{% endfor %}</invoke></|calls|>'))


def test_typing_attribute_and_python_literals(tmp_path):
    d = derive(_write(tmp_path, "dsml.jinja", DSML_LAYOUT))
    assert not d.special, d.why
    assert (d.fmt.spelling.typing, d.fmt.spelling.type_attr) == ("attr", "string")
    # values written with | string (Python literals, as Seed-OSS does): booleans typed as Python writes them, lists
    # and objects read as the text written (said in the checks)
    py = CALL_LOOP.replace("{BODY}", (
        "<call><function={{ tc.function.name }}>{% for k, v in tc.function.arguments.items() %}"
        "<parameter={{ k }}>{{ v | string }}</parameter>{% endfor %}</function></call>"))
    d = derive(_write(tmp_path, "py.jinja", py))
    assert not d.special, d.why
    assert d.fmt.spelling.typing == "python" and d.fmt.spelling.section_open == "<call>"
    assert any("Python literals" in c for c in d.checks)
    calls = d.fmt.parse_strict(d.record.sections["two"])
    assert calls[0].arguments["kq_flag"] is True and calls[0].arguments["kq_items"] == "['vq_item', 2]"


def test_templates_that_give_no_row(tmp_path):
    none = _write(tmp_path, "plain.jinja", "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    d = derive(none)
    assert d.special and "writes no tool calls" in d.why and d.read_by == []
    with pytest.raises(ValueError, match="no row derived"):
        install(d)
    # the call id carries the name (Kimi-K2's functions.NAME:0): the name is not where a grammar reads it
    kimi = CALL_LOOP.replace("{BODY}", (
        "<|call|>functions.{{ tc.function.name }}:{{ loop.index0 }}<|args|>{{ tc.function.arguments | tojson }}"
        "<|end|>"))
    d = derive(_write(tmp_path, "kimi.jinja", kimi))
    assert d.special and "differs per call" in d.why and d.why in d.record.missing[0]
    # the template writes the call's id where the name would be: rendered again with ids that carry the name
    by_id = CALL_LOOP.replace("{BODY}", "<|call|>{{ tc.id }}<|args|>{{ tc.function.arguments | tojson }}<|end|>")
    d = derive(_write(tmp_path, "by_id.jinja", by_id))
    assert d.special and "in place of its name" in d.why and "functions.tlq_alpha:0" in d.record.sections["two"]
    # an attribute other than name= holds the tool name: no grammar row, the generic reader of the derived record
    d = derive(_write(tmp_path, "fn_attr.jinja", TOMORROW.replace('call name=', 'call fn=')))
    assert not d.special and d.from_record and d.record.name_prefix == 'fn="' and d.record.missing == []
    untagged = CALL_LOOP.replace("{BODY}", '{"name": "{{ tc.function.name }}", "arguments": '
                                 "{{ tc.function.arguments | tojson }}}\n")
    d = derive(_write(tmp_path, "untagged.jinja", untagged))
    assert d.special and "untagged" in d.why


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{% for %}", "does not parse"),
        ("{{ raise_exception('no tools here') }}", "no tools here"),
        ("{{ ''.__class__.__mro__ }}", "unsafe"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", str(MAX_STEPS)),
        ("{% set ns = namespace(a=[]) %}{% for i in range(100000) %}{% set ns.a = ns.a + [i] %}{% endfor %}",
         str(MAX_STEPS)),
        ("{{ 'x' * 10**8 }}", "longer than"),
        ("{{ 2 ** 10000000 }}", "exponent"),
        # list.extend is refused (a list extended by itself doubles in one step); append is allowed
        ("{% set l = [1] %}{% for i in range(40) %}{% set _ = l.extend(l) %}{% endfor %}", "unsafe"),
    ],
)
def test_a_template_that_fails_is_a_clear_error_naming_the_file(tmp_path, source, message):
    path = _write(tmp_path, "bad.jinja", source)
    with pytest.raises(TemplateFailure, match=message) as e:
        derive(path)
    assert str(path) in str(e.value)


def test_bounded_number_of_renders(monkeypatch):
    record_mod = importlib.import_module("refiner.formats.derive.diff")
    count = 0
    real = record_mod.render

    def counting(*a, **k):
        nonlocal count
        count += 1
        return real(*a, **k)

    monkeypatch.setattr(record_mod, "render", counting)
    derive(TEMPLATES / "glm45.jinja")
    assert count <= 14
    count = 0
    derive(TEMPLATES / "seed_oss.jinja")  # no row from the renders without assistant text: tried again with some
    assert 14 < count <= 28


def test_template_sources(tmp_path):
    source = (TEMPLATES / "glm45.jinja").read_text(encoding="utf-8")
    cfg = _write(tmp_path, "tokenizer_config.json", json.dumps({"chat_template": source, "eos_token": "<|e|>"}))
    assert load_template(cfg).source == source and load_template(cfg).tokens["eos_token"] == "<|e|>"
    named = tmp_path / "named"
    named.mkdir()
    _write(named, "tokenizer_config.json", json.dumps(
        {"chat_template": [{"name": "default", "template": "x"}, {"name": "tool_use", "template": source}]}))
    assert load_template(named).source == source  # a folder: its tokenizer_config's tool_use template
    folder = tmp_path / "model"
    folder.mkdir()
    _write(folder, "chat_template.jinja", source)
    assert derive(folder).same_as == "glm45"
    for bad in (tmp_path / "missing.jinja", tmp_path / "empty_dir"):
        if bad.suffix == "":
            bad.mkdir()
        with pytest.raises(TemplateFailure, match=str(bad)):
            load_template(bad)
    with pytest.raises(TemplateFailure, match="no chat_template"):
        load_template(_write(tmp_path, "t.json", "{}"))


def test_section_cut_moves_to_a_marker_boundary():
    # the shared prefix "...\n<" and suffix ">..." must not eat into the markers
    base = "A\n<|end|>"
    other = "A\n<tool_call>x</tool_call><|end|>"
    assert inserted(base, other) == "<tool_call>x</tool_call>"


# ---- the refiner and the CLI ----------------------------------------------------------------------------------------

WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]


# a family nobody registered: its own section, call and argument tags
TOMORROW = CALL_LOOP.replace("{BODY}", (
    "{% if loop.first %}<act:calls>\n{% endif %}<act:call name=\"{{ tc.function.name }}\">\n"
    "{% for k, v in tc.function.arguments.items() %}<act:arg name=\"{{ k }}\">{{ v if v is string else v | tojson }}"
    "</act:arg>\n{% endfor %}</act:call>\n{% if loop.last %}</act:calls>{% endif %}"))


@pytest.fixture
def scratch_registry(monkeypatch):
    """Rows installed by a test leave the registry as it was (later tests list every registered format)."""
    from refiner.formats import base

    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))


def test_refiner_reads_and_writes_the_derived_dialect(tmp_path, scratch_registry):
    path = _write(tmp_path, "tomorrow.jinja", TOMORROW)
    r = Refiner(chat_template=path)
    assert r.fmt.startswith("derived_") and r.fmt in formats.names()
    text = ('<act:calls>\n<act:call name="get_weather">\n<act:arg name="city">Paris</act:arg>\n'
            '<act:arg name="days">3</act:arg>\n</act:call>\n</act:calls>')
    out = r.refine({"upstream": text, "tools": WEATHER})
    assert out["format"] == r.fmt and out["stage"] == "unchanged"
    assert out["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]
    # another dialect's call is written back in the template's dialect
    out = r.refine({"upstream": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
                    "tools": WEATHER})
    assert out["refined"].startswith('<act:calls>\n<act:call name="get_weather">')
    assert formats.get(r.fmt).parse_strict(out["refined"]) == [ToolCall("get_weather", {"city": "Oslo"})]
    # a refiner sent to a worker process installs the dialect there too; installing twice is one registration
    clone = pickle.loads(pickle.dumps(r))
    assert clone.fmt == r.fmt and clone.chat_template == r.chat_template
    assert Refiner(chat_template=path).fmt == r.fmt
    # a template whose spelling is a built-in row's uses that row (its lenient repairs included)
    assert Refiner(chat_template=TEMPLATES / "glm45.jinja").fmt == "glm45"
    assert Refiner(chat_template=TEMPLATES / "minimax_m2.jinja").fmt == "minimax_m2"


def test_a_template_nothing_reads_falls_back_to_detection_and_a_double_format_is_refused(tmp_path, caplog):
    plain = _write(tmp_path, "plain.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}")
    with caplog.at_level("WARNING"):
        r = Refiner(chat_template=plain)  # never a refusal to start: detection, and one log line naming the file
    assert r.fmt is None
    lines = [rec.getMessage() for rec in caplog.records if "plain.jinja" in rec.getMessage()]
    assert len(lines) == 1 and "detected" in lines[0]
    out = r.refine({"upstream": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
                    "tools": WEATHER})
    assert out["calls"] == [{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    broken = _write(tmp_path, "broken.jinja", "{% for %}")
    assert Refiner(chat_template=broken).fmt is None
    assert Refiner(chat_template=tmp_path / "missing.jinja").fmt is None
    # a family a hand-written module reads and writes as the template does
    assert Refiner(chat_template=TEMPLATES / "deepseek_v31.jinja").fmt == "deepseek_v31"
    with pytest.raises(ValueError, match="not both"):
        Refiner(fmt="hermes", chat_template=TEMPLATES / "glm45.jinja")


def test_serve_builds_its_refiner_from_the_template():
    from refiner.commands.serve import build_refiner

    ref = build_refiner(model=None, refiner_base_url=None, engine=None,
                        chat_template=str(TEMPLATES / "qwen3_coder.jinja"))
    assert ref.fmt == "qwen3_coder"


def test_cli_formats_derive(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["formats", "derive", "--chat-template", str(TEMPLATES / "glm45.jinja")])
    assert res.exit_code == 0, res.output
    assert "the same spelling as the built-in row 'glm45'" in res.output
    assert "key_prefix" in res.output and "<arg_key>" in res.output
    res = runner.invoke(app, ["formats", "derive", "--chat-template", str(TEMPLATES / "jamba.jinja"), "--json"])
    d = json.loads(res.output)
    assert d["result"] == "row" and d["grammar"] == "JsonCalls" and d["spelling"]["payload"] == "list"
    assert d["record"]["derived_from"]["section_start"].startswith("two") and d["not_derived"] == []
    res = runner.invoke(app, ["formats", "derive", "--chat-template", str(TEMPLATES / "deepseek_v31.jinja")])
    assert res.exit_code == 0 and "NamedJson" in res.output and "written as the template writes it by: deepseek_v31" \
        in res.output
    plain = _write(tmp_path, "plain.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}")
    res = runner.invoke(app, ["formats", "derive", "--chat-template", str(plain)])
    assert res.exit_code == 1 and "writes no tool calls" in res.output
    res = runner.invoke(app, ["formats", "derive", "--chat-template", "/nonexistent/t.jinja"])
    assert res.exit_code == 2 and "no such file" in res.output
    res = runner.invoke(app, ["formats", "--json"])  # the listing is unchanged
    assert res.exit_code == 0 and any(f["name"] == "glm45" for f in json.loads(res.output))


# ---- derived rows on hostile texts ----------------------------------------------------------------------------------


INVENTED = Path(__file__).resolve().parent / "data" / "invented"


@pytest.mark.parametrize("template", ["minimax_m2.jinja", "hermes.jinja", "gemma4.jinja", "dsml", "quill.jinja",
                                      "idcall.jinja", "wrapped.jinja"])
def test_derived_rows_raise_only_their_error_on_hostile_texts(template, tmp_path):
    """A derived row is a new spelling of a grammar, and the record reader of a family no grammar holds (quote
    tokens, an id after the name, wrapped call objects) reads it by its record: each keeps the format contract on the
    storms every registered format is checked on (tests/test_bounds.py)."""
    from test_bounds import SIZE, assert_contract_on_storms

    path = _write(tmp_path, "dsml.jinja", DSML_LAYOUT) if template == "dsml" else (
        INVENTED / template if (INVENTED / template).exists() else TEMPLATES / template)
    assert_contract_on_storms(derive(path).fmt, SIZE)


def test_generation_blocks_and_strftime_render_as_in_transformers(tmp_path):
    """transformers' environment: the {% generation %} tag, strftime_now, tojson without HTML escaping, loopcontrols."""
    source = (
        "{{ strftime_now('%Y') }}{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
        "{% for tc in m.tool_calls or [] %}{% if loop.index > 5 %}{% break %}{% endif %}<tool_call>\n"
        "{{ {'name': tc.function.name, 'arguments': tc.function.arguments} | tojson }}\n</tool_call>"
        "{% endfor %}{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}")
    d = derive(_write(tmp_path, "gen.jinja", source))
    assert not d.special, d.why
    assert (d.fmt.spelling.open, d.fmt.spelling.close, d.fmt.spelling.payload) == ("<tool_call>", "</tool_call>", "object")
    # tojson as transformers defines it: no HTML escaping (jinja2's own writes \u003c), unicode kept, its options
    from refiner.formats.derive.render import ChatTemplate, compile_template, render

    t = ChatTemplate("{{ messages | tojson }}|{{ messages | tojson(indent=1) }}", "inline")
    assert render(compile_template(t), t, ["<a> é"], None) == '["<a> é"]|[\n "<a> é"\n]'


# The record (refiner.formats.derive.record) of each corpus template: its literals, or what it could not derive.
RECORDS = {
    "hermes.jinja": dict(shape="json_object", call_start="<tool_call>\n", call_end="\n</tool_call>", name_key="name",
                         args_key="arguments"),
    "jamba.jinja": dict(shape="json_list", section_start="<tool_calls>", section_end="</tool_calls>"),
    "glm45.jinja": dict(shape="pairs", name_prefix="<tool_call>", key_prefix="<arg_key>",
                        key_suffix="</arg_key>\n<arg_value>", value_suffix="</arg_value>\n", call_end="</tool_call>"),
    "minimax_m2.jinja": dict(shape="pairs", section_start="\n<minimax:tool_call>\n", call_start="<invoke ",
                             name_prefix='name="', name_suffix='">\n', key_prefix='<parameter name="',
                             key_suffix='">', value_suffix="</parameter>\n", strings="raw", literals="json"),
    "qwen3_coder.jinja": dict(shape="pairs", name_prefix="<function=", name_suffix=">\n", key_prefix="<parameter=",
                              key_suffix=">\n", value_suffix="\n</parameter>\n", literals="python"),
    "seed_oss.jinja": dict(shape="pairs", name_prefix="<function=", key_prefix="<parameter=", literals="python",
                           reasoning_end="</seed:think>"),
}
RECORDS["deepseek_v32.jinja"] = dict(shape="pairs", key_suffix='" string="true">', key_suffix_typed='" string="false">',
                                     name_prefix='name="', strings="raw")
RECORDS["gemma4.jinja"] = dict(shape="pairs", name_prefix="<|tool_call>call:", name_suffix="{", key_suffix=":",
                               arg_sep=",", quote_open='<|"|>', strings="quoted", literals="quoted")
RECORDS["functiongemma.jinja"] = dict(shape="pairs", quote_open="<escape>", quote_close="<escape>")


@pytest.mark.parametrize("template", sorted(RECORDS))
def test_the_record_of_each_corpus_template(template):
    d = derive(TEMPLATES / template)
    assert d.record.complete, d.record.missing
    for key, value in RECORDS[template].items():
        assert getattr(d.record, key) == value, key
    # the derived row (or built-in format) is what it was: the record reader stands in only where nothing else reads
    assert not d.from_record


def test_the_record_is_derived_with_no_assumption_about_spellings(tmp_path):
    # the same layout with every literal respelt: the record follows the text, whatever it is
    source = (TEMPLATES / "minimax_m2.jinja").read_text(encoding="utf-8")
    respelt = (source.replace("minimax:tool_call", "zz|calls").replace("<invoke name=", "<<op fn=")
               .replace("</invoke>", "<</op>").replace('<parameter name="', '[[k ').replace("</parameter>", "]]/"))
    d = derive(_write(tmp_path, "respelt.jinja", respelt))
    assert not d.special and d.record.complete, (d.why, d.record.missing)
    assert d.record.key_prefix.strip() == "[[k" and d.record.name_prefix.startswith("fn=")
    text = d.fmt.render([ToolCall("get_weather", {"city": "Paris", "days": 3})])
    assert d.fmt.parse_strict(text) == [ToolCall("get_weather", {"city": "Paris", "days": 3})]


# ---- templates that need more than the plain renders: each construct in a template of our own ----------------------

BRACKETS = CALL_LOOP.replace("{BODY}", "[CALL]{{ tc.function.name }}[ARGS]{{ tc.function.arguments | tojson }}")


def test_call_ids_are_nine_letters_and_digits_and_found_between_name_and_arguments(tmp_path):
    # a template that accepts only ids of nine letters or digits (as Mistral's do), and writes the id after the name
    strict = CALL_LOOP.replace("{BODY}", (
        "{% if tc.id | length != 9 or not tc.id.isalnum() %}{{ raise_exception('ids are nine letters or digits') }}"
        "{% endif %}[CALL]{{ tc.function.name }}[ID]{{ tc.id }}[ARGS]{{ tc.function.arguments | tojson }}"))
    d = derive(_write(tmp_path, "ids.jinja", strict))
    assert "two" in d.record.sections, d.why
    assert (d.record.id_position, d.record.name_suffix, d.record.id_suffix) == ("after_name", "[ID]", "[ARGS]")


def test_an_iterable_given_to_tojson_is_written_as_a_list(tmp_path):
    from refiner.formats.derive.render import ChatTemplate, compile_template, render

    t = ChatTemplate("{{ messages | map(attribute='role') | tojson }}", "inline")
    assert render(compile_template(t), t, [{"role": "user"}, {"role": "assistant"}], None) == '["user", "assistant"]'
    d = derive(_write(tmp_path, "mapped.jinja", "{{ tools | map(attribute='function') | tojson }}\n" + BRACKETS))
    assert not d.special, d.why


def test_the_placeholder_schema_and_the_engine_variables_templates_read(tmp_path):
    # a template that spells an object parameter's value type from additionalProperties (as Command R+'s does)
    typed = ("{% for t in tools %}{% for k, p in t.function.parameters.properties.items() %}{% if p.type == 'object' %}"
             "{{ k }}: Dict[str, {{ p.additionalProperties.type }}]\n{% endif %}{% endfor %}{% endfor %}" + BRACKETS)
    assert not derive(_write(tmp_path, "typed.jinja", typed)).special
    # one that joins the tools as text given as `functions` and today's date (llama.cpp passes both)
    engine = "{{ 'Today is ' + datetime + '. Functions:\n' + functions + '\n' }}" + BRACKETS
    d = derive(_write(tmp_path, "engine.jinja", engine))
    assert not d.special, d.why


def test_turns_with_no_text_or_text_that_is_none(tmp_path):
    # a template that refuses an assistant turn with neither text nor calls (as Ministral 3's does)
    refusing = ("{% for m in messages %}{% if m.role == 'assistant' and not m.content and not m.tool_calls %}"
                "{{ raise_exception('an empty assistant turn') }}{% endif %}{% endfor %}" + BRACKETS)
    d = derive(_write(tmp_path, "refusing.jinja", refusing))
    assert not d.special, d.why
    # one that writes calls only when the content is None, and concatenates the arguments as a string (as
    # DeepSeek-R1-Distill-Llama's does)
    none_only = ("{% for m in messages %}{% if m.role == 'assistant' and m.content is none %}"
                 "{% for tc in m.tool_calls %}{{ '[CALL]' + tc.function.name + '[ARGS]' + tc.function.arguments }}"
                 "{% endfor %}{% elif m.role == 'assistant' %}{{ m.content }}{% else %}{{ m.content }}{% endif %}"
                 "{% endfor %}")
    d = derive(_write(tmp_path, "none_only.jinja", none_only))
    assert not d.special and d.record.arguments_given_as_text, d.why
    # when no variant gives a row, the why is that of a variant that wrote the calls
    untagged = none_only.replace("'[CALL]' + tc.function.name + '[ARGS]' + tc.function.arguments",
                                 "'{\"name\": \"' + tc.function.name + '\", \"arguments\": ' + tc.function.arguments + '}\n'")
    d = derive(_write(tmp_path, "untagged_none_only.jinja", untagged))
    assert d.special and "untagged" in d.why, d.why


def test_a_replaced_marker_keeps_its_opening_bracket_and_an_insertion_falls_between_markers():
    # with calls, the no-call turn's end marker "<end|>" is replaced: the shared "<" opens the calls' marker too
    assert inserted("A\n<end|>\n", "A\n<|call>x<call|><|resp>") == "<|call>x<call|><|resp>"
    # an insertion the two renders allow at several places, none after a space: where a marker closes and one opens
    assert inserted("<s><e>", "<s><c>x</c><e>") == "<c>x</c>"


def test_the_end_of_turn_token_is_not_part_of_a_closer(tmp_path):
    # an answer ends with <eot>; a turn with calls writes them in a list, then <eot>; an empty turn writes nothing
    source = ("{% for m in messages %}{% if m.role != 'assistant' %}{{ m.content }}\n"
              "{% elif m.tool_calls %}<calls>{{ m.tool_calls | map(attribute='function') | list | tojson }}</calls>"
              "<eot>\n{% elif m.content %}{{ m.content }}<eot>\n{% endif %}{% endfor %}")
    d = derive(_write(tmp_path, "eot.jinja", source))
    assert not d.special, d.why
    assert d.record.turn_end.strip() == "<eot>" and d.record.section_end.strip() == "</calls>"
    assert (d.fmt.spelling.open, d.fmt.spelling.close) == ("<calls>", "</calls>")


# each call: a token, the call's id, a token before the name, the name, a token, the JSON arguments; a section around
ID_FIRST = (
    "{% for m in messages %}{% if m.role == 'assistant' %}{{ m.content or '' }}{% if m.tool_calls %}<|acts|>"
    "{% for tc in m.tool_calls %}<|act:open|>{{ tc.id }}<|act:fn|>{{ tc.function.name }}<|act:in|>"
    "{{ tc.function.arguments | tojson }}<|act:shut|>{% endfor %}<|acts:done|>{% endif %}<|eot|>"
    "{% else %}<|u|>{{ m.content }}<|eot|>{% endif %}{% endfor %}"
)


def test_a_call_id_before_the_name_is_read_and_written_as_the_calls_place(tmp_path):
    d = derive(_write(tmp_path, "id_first.jinja", ID_FIRST))
    assert not d.special and isinstance(d.fmt, NamedJson), d.why
    sp = d.fmt.spelling
    assert (sp.section_open, sp.section_close, sp.call_open, sp.id_close, sp.name_close, sp.call_close) == (
        "<|acts|>", "<|acts:done|>", "<|act:open|>", "<|act:fn|>", "<|act:in|>", "<|act:shut|>")
    calls = [ToolCall("ferry", {"port": "Split", "n": 2}), ToolCall("rate", {})]
    text = d.fmt.render(calls)
    assert text.startswith("<|acts|><|act:open|>0<|act:fn|>ferry<|act:in|>") and "<|act:open|>1<|act:fn|>rate" in text
    assert d.fmt.parse_strict(text) == calls
    model = '<|acts|><|act:open|>k2j4h6g8f0<|act:fn|>ferry<|act:in|>{"port": "Hvar"}<|act:shut|><|acts:done|>'
    assert d.fmt.parse_strict(model) == [ToolCall("ferry", {"port": "Hvar"})]
    cut = '<|acts|><|act:open|>k2j4h6g8f0<|act:fn|>ferry<|act:in|>{"port": "Hv'
    got = d.fmt.parse_lenient(cut)
    assert got.calls == [ToolCall("ferry", {"port": "Hv"})] and got.cut is not None and not got.cut.clean
    with pytest.raises(formats.FormatError):
        d.fmt.parse_strict('<|acts|><|act:open|>a b<|act:fn|>ferry<|act:in|>{}<|act:shut|><|acts:done|>')


# GLM's key/value pairs in a section, every token carrying the tokenizer's suffix (Hy3's :opensource)
SUFFIXED = (
    "{% for m in messages %}{% if m.role == 'assistant' %}{{ m.content or '' }}{% if m.tool_calls %}<tool_calls:rel7>"
    "{% for tc in m.tool_calls %}<tool_call:rel7>{{ tc.function.name }}<tool_sep:rel7>"
    "{% for k, v in tc.function.arguments.items() %}<arg_key:rel7>{{ k }}</arg_key:rel7>"
    "<arg_value:rel7>{{ v if v is string else v | tojson }}</arg_value:rel7>{% endfor %}</tool_call:rel7>{% endfor %}"
    "</tool_calls:rel7>{% endif %}<|eot|>{% else %}<|u|>{{ m.content }}<|eot|>{% endif %}{% endfor %}"
)


def test_a_suffix_every_token_carries_is_the_rows_tag_suffix(tmp_path):
    d = derive(_write(tmp_path, "suffixed.jinja", SUFFIXED))
    assert not d.special and isinstance(d.fmt, XmlParams), d.why
    sp = d.fmt.spelling
    assert (sp.tag_suffix, sp.call_open, sp.name_sep, sp.value_close) == (
        ":rel7", "<tool_call>", "<tool_sep>", "</arg_value>")
    assert d.same_as is None  # hunyuan_v3's suffix is :opensource
    text = d.fmt.render([ToolCall("f", {"a": 1})])
    assert "<tool_call:rel7>f<tool_sep:rel7>" in text and d.fmt.parse_strict(text) == [ToolCall("f", {"a": 1})]
    mixed = SUFFIXED.replace("<tool_sep:rel7>", "<tool_sep>")  # one token without it: no suffix derived
    assert derive(_write(tmp_path, "mixed.jinja", mixed)).fmt.spelling.tag_suffix == ""


def test_hunyuan_v3_writes_the_public_checkpoints_suffix_and_reads_plain_and_slipped_tags():
    hy = formats.get("hunyuan_v3")
    calls = [ToolCall("get_weather", {"city": "Chengdu", "days": 3})]
    text = hy.render(calls)
    assert text.startswith("<tool_calls:opensource><tool_call:opensource>get_weather<tool_sep:opensource>")
    assert hy.parse_strict(text) == calls and formats.detect_format(text) == "hunyuan_v3"
    plain = text.replace(":opensource", "")
    assert hy.parse_strict(plain) == calls and formats.detect_format(plain) == "hunyuan_v3"
    slipped = text.replace("<arg_value:opensource>", "<arg_valueopensource>", 1)  # a suffix that lost its ':'
    with pytest.raises(formats.FormatError):
        hy.parse_strict(slipped)
    got = hy.parse_lenient(slipped)
    assert got.calls == calls and any("without the ':'" in p.message for p in got.problems)
    res = Refiner().refine({"upstream": slipped, "format": "hunyuan_v3"})
    assert res["calls"] == [{"name": "get_weather", "arguments": {"city": "Chengdu", "days": 3}}]
