"""The BFCL-derived tier-1 suite (refiner/eval/tier1_suite.py): BFCL's gold calls and specs, every registered wire
format, one error class at a time, both spec policies. The default run measures a seeded sample of 40 records (5 per
category) and asserts the targets on it; a larger one (190 records, up to 25 per category) runs on a fifth of the
formats in the slow suite and on all of them in the long one, and the full run (2,351 records) is
benchmarks/bench_tier1.py.

The full run's figures are in the tables the evaluation writes (``OUT/tier1/tables.md``, ``summary.json``: see
docs/evaluation.md). The formats whose lenient readers fall short of the 95% format-error target on the seeded
sample are listed in FORMAT_SHORTFALLS; harm before tier 1 that the suite knows of is in KNOWN_HARM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from refiner import formats
from refiner.calls import ToolCall
from refiner.eval import tier1_suite as ts
from refiner.formats import base as formats_base
from refiner.specs import load_tools

SAMPLE = 40  # records, 5 per BFCL category


def load(**kw) -> list[ts.SuiteCase]:
    try:
        return ts.load_cases(**kw)
    except FileNotFoundError as e:
        pytest.skip(str(e))


# The XML parameter grammar's rows (refiner/formats/catalog.py) but glm45 and qwen3_coder are rated apart: their
# lenient tag repair is the grammar's generic mender (look-alikes, a closer without its slash, a lost tag before a
# name="..."), not a family respelling table like glm45's and qwen3_coder's; a tag lost with the tool's name in it
# (<invoke name="f"> dropped whole), a broken attribute quote and DSML's full-width bars written wrong are not
# recovered; and their values are untyped text, so many type drifts are settled only as far as the text allows (as
# for glm45 and qwen3_coder). Floors: the format-error rate on this seeded sample (default policy), rounded down. The
# wrong tags are drawn from every registered format's tags, so a format added changes the inputs (and can move a
# row's rate by a few cases). Solar Open 2's <|...|> tokens written wrong are respelt (as the named-JSON rows' are);
# one that lost its first half (NAMEstart|>key) is not put back.
XML_ROW_FLOORS: dict[str, float] = {
    "deepseek_v32": 0.80, "deepseek_v4": 0.85, "deepseek_v41": 0.80, "dots1": 0.90, "hunyuan_v3": 0.85,
    "hunyuan_v4": 0.60, "k2_horizon": 0.75, "longcat": 0.80, "minicpm5": 0.85, "minimax_m2": 0.90,
    "muse_glimmer": 0.85, "seed_oss": 0.80, "step3": 0.85, "gigachat35": 0.80, "iquest_coder_v2": 0.80,
    "iquest_q1": 0.75, "zaya_xml": 0.85, "multi_format_minimax": 0.90, "solar_open2": 0.70, "telechat4": 0.75,
    "multi_format_dsv32": 0.85,
    "step_deepresearch": 0.90,
}


@pytest.fixture(scope="module")
def sample() -> ts.SuiteResult:
    return ts.run_suite(load(limit=SAMPLE), fmts=[f for f in formats.names() if f not in XML_ROW_FLOORS])


def test_the_xml_grammar_rows_meet_their_floors_and_harm_nothing():
    res = ts.run_suite(load(limit=SAMPLE), fmts=list(XML_ROW_FLOORS), policies=("default",))
    below = {f: f"{fixed}/{n}" for f, (fixed, n) in ts.group_rates(res, "format").items()
             if fixed / n < XML_ROW_FLOORS[f]}
    assert below == {}
    table = res.tables["default"]
    assert ts.row_total(table, ts.CLEAN)["harmed"] == 0
    clean = ts.row_total(table, ts.CLEAN)
    assert clean["correct"] == clean["n"] == clean["untouched"]


# ----------------------------------------------------------------------------------------------------------------
# The cases


def test_openai_tools_are_converted_by_bfcl_rules():
    fn = {"name": "finance.loan_payment", "description": "Monthly payment.", "parameters": {
        "type": "dict", "required": ["principal"], "properties": {
            "principal": {"type": "float", "description": "Amount."},
            "term": {"type": "integer", "description": "Months."},
            "fees": {"type": "tuple", "items": {"type": "float"}, "description": "Fees."},
            "extra": {"type": "dict", "properties": {"note": {"type": "any"}}, "description": "More."},
            "currency": {"description": "No type given."}}}}
    (tool,) = ts.openai_tools([fn])
    assert tool["type"] == "function" and tool["function"]["name"] == "finance_loan_payment"
    params = tool["function"]["parameters"]
    props = params["properties"]
    assert params["type"] == "object" and params["required"] == ["principal"]
    assert props["principal"] == {"type": "number", "format": "float", "description": "Amount."}
    assert props["fees"]["type"] == "array" and props["fees"]["items"]["type"] == "number"
    assert props["extra"]["type"] == "object" and props["extra"]["properties"]["note"]["type"] == "string"
    assert props["currency"]["type"] == "string"
    assert fn["parameters"]["type"] == "dict"  # the record itself is left as it was
    (spec,) = load_tools([tool])
    assert spec.dialect == "openai" and spec.params["fees"].items.type == "number"


def test_cases_alternate_between_bfcl_and_openai_specs():
    cases = load(limit=16)
    assert len(cases) == 16 and {c.category for c in cases} == set(ts.CATEGORIES)
    styles = [c.style for c in cases]
    assert styles.count("bfcl") == styles.count("openai") == 8
    for c in cases:
        names = {s.name for s in c.specs}
        assert c.gold and all(call.name in names for call in c.gold), c.id
        assert {s.dialect for s in c.specs} == ({"bfcl"} if c.style == "bfcl" else {"openai"}), c.id
        if c.style == "openai":
            assert not any("." in n for n in names)


def test_carry_skips_formats_that_cannot_hold_the_calls():
    calls = [ToolCall("get_weather", {"city": "Paris"})]
    assert ts.carry(calls, "hermes") == (calls, "")
    assert ts.carry(calls, "order") == (None, "names only")
    assert ts.carry([ToolCall("get weather", {"city": "Paris"})], "toolace") == (None, "render error")


def test_judge_counts_a_correct_call_that_was_changed_as_harm():
    fmt = formats.get("hermes")
    gold = [ToolCall("f", {"a": 1}), ToolCall("g", {"b": 2})]
    case = ts.SuiteCase("x", "parallel", "bfcl", [], [], gold)
    item = ts.SuiteInput(case, "hermes", "tool_name_typo", fmt.render([ToolCall("ff", {"a": 1}), gold[1]]), gold)
    assert ts.judge(item, fmt.render(gold), True) == {"n": 1, "harmed": 0, "harmed_calls": 0, "fixed": 1,
                                                       "still_wrong": 0}
    broke_g = fmt.render([gold[0], ToolCall("g", {"b": "2"})])
    assert ts.judge(item, broke_g, True)["harmed_calls"] == 1
    clean = ts.SuiteInput(case, "hermes", ts.CLEAN, fmt.render(gold), gold)
    assert ts.judge(clean, clean.text, False)["untouched"] == 1
    assert ts.judge(clean, broke_g, True) == {"n": 1, "harmed": 1, "harmed_calls": 1, "untouched": 0, "correct": 0}


# ----------------------------------------------------------------------------------------------------------------
# Coverage: every registered format, including formats added later


def test_every_registered_format_is_measured_or_counted_as_skipped(sample):
    assert sample.fmts == [f for f in formats.names() if f not in XML_ROW_FLOORS]  # those: measured apart
    assert set(XML_ROW_FLOORS) <= set(formats.names())
    for f in sample.fmts:
        skipped = sum(sample.inputs.cannot_carry[f].values())
        assert sample.inputs.carried[f] + skipped == sample.n_cases, f
        fmt = formats.get(f)
        if fmt.names_only:
            assert sample.inputs.cannot_carry[f] == {"names only": sample.n_cases}
        elif type(fmt).retype is not formats.WireFormat.retype:
            # values written as untyped text: a null for a string parameter reads back as "null" (BFCL's
            # live_simple_103-61-1 passes county=None), so a few records are not carried
            assert set(sample.inputs.cannot_carry[f]) <= {"reads back other calls"}, f
            assert sample.inputs.carried[f] >= 0.9 * sample.n_cases, (f, sample.inputs.cannot_carry[f])
        else:
            assert sample.inputs.carried[f] == sample.n_cases, (f, sample.inputs.cannot_carry[f])


def test_a_format_registered_later_is_measured_too(monkeypatch):
    cls = type("XlamTwin", (type(formats.get("xlam")),), {"name": "xlam_twin_for_test"})
    monkeypatch.setitem(formats_base._REGISTRY, "xlam_twin_for_test", cls())
    cases = load(limit=8)
    result = ts.run_suite(cases, classes=("tool_name_typo",), policies=("default",))
    assert "xlam_twin_for_test" in result.fmts and result.inputs.carried["xlam_twin_for_test"] == len(cases)
    assert result.tables["default"][ts.CLEAN]["xlam_twin_for_test"]["untouched"] == len(cases)
    assert result.tables["default"]["tool_name_typo"]["xlam_twin_for_test"]["n"] == len(cases)


# ----------------------------------------------------------------------------------------------------------------
# The targets, on the seeded sample


# Format errors fixed per wire format where the formats' lenient readers fall short of the 95% target on this sample
# (the text-level repair is each format's reader, refiner/formats/, not a tier-1 policy): a floor a few points below
# the sample's rate, and why. A format not listed must reach 95%; a listed one must not fall below its floor.
# The listed formats outside the XML grammar (the seeded sample, default policy, floors rounded down to 5%): their
# lenient readers recover a lost or misspelt call token only where the grammar's shape shows it (Gemma 4 /
# FunctionGemma: call:NAME{ without its token, tokens written wrong; PLaMo 3 and Kimi K3: barred tokens respelt).
FORMAT_SHORTFALLS: dict[str, tuple[float, str]] = {
    "functiongemma": (0.75, "a lost or misspelt <escape> quote token is not recovered"),
    "gemma4": (0.70, "the <|\"|> quote token (no letters to respell) lost or swapped is not recovered"),
    "glm53_flash": (0.90, ("<tool_call> that lost its '>' is glued to the name (<tool_callNAME>{...}): not split "
                           "(missing tag: 34 of 40 fixed)")),
    "kimi_k3": (0.85, ("a lost <|open|>argument or <|open|>call token (key=\"...\" left bare) or a string value's "
                       "closer written wrong, read as its text (strictly valid)")),
    "multi_format_gptoss": (0.90, ("a lost or misspelt <tool_call>to=functions. (the row's only marker) is not put back "
                                   "(missing tag: 32 of 40 fixed)")),
    "solar_open": (0.90, ("a call token lost whole before any call but the first is not put back (missing tag: 29 of "
                          "40 fixed)")),
    "step_audio_2": (0.85, "a lost or misspelt <tool_call>function opener (the row's only marker) is not put back"),
    "granite_pythonic": (0.80, ("no tag closes the call lines: a last line that lost its ')' or a closing quote reads "
                                "as a text cut there (34 of 40 fixed)")),
    "cwm": (0.80, ("a lost or misspelt <tool: function> opener (the row's only marker; vLLM reads it in any case) is not "
                   "put back before any call but the first, and a look-alike closer leaves that call's arguments "
                   "unread (missing tag: 25 of 40 fixed, wrong tag 29 of 40)")),
    "functionary_v2": (0.85, ("<|from|>assistant written in another case, or a word or a broken token in place of "
                              "<|content|> (Action:, \"response\"), is not put back (wrong tag: 34 of 40 fixed)")),
}


def test_targets_are_met_on_the_seeded_sample(sample):
    verdicts = {v.target.name: v for v in ts.check_targets(sample, min_n=20)}
    assert list(verdicts) == [t.name for t in ts.TARGETS]
    missed = [v.describe() for name, v in verdicts.items() if not v.met and not name.startswith("format errors")]
    assert missed == []


def test_format_errors_fixed_per_format(sample):
    """The format-error target per format: 95%, or the known shortfall's floor (see FORMAT_SHORTFALLS)."""
    below = {}
    for f, (fixed, n) in ts.group_rates(sample, "format").items():
        floor = FORMAT_SHORTFALLS.get(f, (0.95, ""))[0]
        if fixed / n < floor:
            below[f] = f"{fixed}/{n} < {floor:.0%}"
    assert below == {}, "a format's reader got worse, or a new format needs its shortfall listed (and why)"
    fmts = set(sample.fmts)
    assert set(FORMAT_SHORTFALLS) <= fmts


# Cells where a correct call is lost before tier 1 sees it, by how the pipeline reads a broken text (full run, default
# policy: 63 of 807,744 inputs, none of them clean):
KNOWN_HARM = {
    # a dropped closing quote leaves a string open to the end of the text, which reads as a text cut off mid-value:
    # the call is left out as truncated (refiner.formats Cut, repair.cut_call_index)
    ("broken_json", "openai"): "read as truncated",
    # the same where the format has no closing token after the last call's arguments: a dropped last '}' is exactly
    # what a text cut off there looks like (the last value may be cut too: 355.48 of 355.485)
    ("broken_json", "mistral_v11"): "read as truncated",
    # llama3_json's strict reader takes '[{call}, {name": broken}]' as one call followed by prose, and the pipeline
    # reads a broken text in a format it is strictly valid in (formats.reading.choose_formats)
    ("broken_json", "nestful"): "read as llama3_json",
    # another format's sentinel in place of the format's own tag: the text is read in that format
    # (formats.reading.choose_formats), which finds fewer calls or a call named by the surrounding JSON
    ("wrong_tag", "anthropic"): "read as deepseek_v31",
    ("wrong_tag", "minimax"): "read in the format whose tag replaced minimax's (1 of 190 in the full run)",
    ("wrong_tag", "deepseek_v31"): "read as mistral_v11",
    ("wrong_tag", "inkling"): "read as mistral_v11 (1 of 40 on the seeded sample: [TOOL_CALLS] for <|end_message|>)",
    # as mistral_v11: Functionary v3.2 writes no token after the last call's arguments, so a dropped last '}' reads as
    # a text cut there
    ("broken_json", "functionary_v32"): "read as truncated",
    # GLM-5.3-Flash's JSON form likewise closes no call: a last call that lost its closing braces after a number is a
    # text cut in that number (1 of 190 in the full run)
    ("broken_json", "glm53_flash"): "read as truncated",
    # granite_pythonic's call lines have no closing token either: a last line that lost its ')' reads as cut there
    ("broken_json", "granite_pythonic"): "read as truncated (3 of 190 in the full run)",
    # ReAct's Action Input ends at its object: a last call that lost its '}' after a number reads as cut there (1 of
    # 190 in the full run)
    ("broken_json", "react"): "read as truncated",
    # nor does Gorilla OpenFunctions v2 after its last call: a last call that lost its ')' reads as cut there
    ("broken_json", "openfunctions_v2"): "read as truncated (1 of 40 on the seeded sample)",
    # NexusRaven's <bot_end> is a stop sequence, often left out: a quote lost before the last value opens a string
    # that runs to the end, which reads as a text cut there
    ("broken_json", "nexusraven"): "read as truncated (1 of 40 on the seeded sample)",
    # FunctionGemma's string quote is the <escape> token: one lost before a value leaves the closing one opening a
    # string that runs to the end of the text, which reads as a cut mid-value
    ("missing_tag", "functiongemma"): "read as truncated",
}


def test_the_default_policy_harms_no_correct_call(sample):
    harmed = {(row, f): c["harmed"] for row, per in sample.tables["default"].items() for f, c in per.items()
              if c["harmed"] and (row, f) not in KNOWN_HARM}
    assert harmed == {}
    assert ts.row_total(sample.tables["default"], ts.CLEAN)["harmed"] == 0


def test_tier1_never_invents_a_value(sample):
    for policy, table in sample.tables.items():
        for row in ts.NEVER_FIXED:
            c = ts.row_total(table, row)
            assert c["n"] >= 100 and c["fixed"] == 0, (policy, row, c)


def test_what_the_default_policy_leaves_to_the_model(sample):
    """Undeclared parameters and numbers written as text are left by default (NESTFUL's spec files omit parameters
    its gold passes; BFCL's gold passes 1 for the string enum ["1", "2", "3"]); trust_spec fixes them."""
    default, trusted = sample.tables["default"], sample.tables["trust_spec"]
    extra_d, extra_t = ts.row_total(default, "extra_param/undeclared"), ts.row_total(trusted, "extra_param/undeclared")
    assert extra_d["fixed"] == 0 and extra_t["fixed"] / extra_t["n"] >= 0.9
    drift_d, drift_t = ts.row_total(default, "value_type_drift"), ts.row_total(trusted, "value_type_drift")
    assert drift_d["fixed"] / drift_d["n"] < 0.3
    assert drift_t["fixed"] / drift_t["n"] >= 0.9


def test_the_tables_name_every_format_and_target(sample):
    text = ts.render_tables(sample)
    for f in sample.fmts:
        assert f"| {f} |" in text
    for t in ts.TARGETS:
        assert t.name in text
    summary = json.loads(json.dumps(ts.summary(sample)))
    assert summary["cases"] == SAMPLE and set(summary["tables"]) == set(ts.POLICIES)


# ----------------------------------------------------------------------------------------------------------------
# Entry points: the benchmark script and the eval command


def test_the_tier1_benchmark_runs_at_a_tiny_size():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_tier1.py"), "--limit", "8", "--formats",
                          "hermes,toolace", "--quiet"], capture_output=True, text=True, cwd=ROOT, check=False,
                         timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if "no bfcl_eval" in res.stderr:
        pytest.skip("bfcl-eval wheel not available")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Per class and format, % fixed (trust_spec)" in res.stdout and "| clean (untouched) |" in res.stdout
    assert "targets met:" in res.stdout and "ms per input" in res.stdout


def test_eval_command_runs_the_suite(tmp_path):
    from typer.testing import CliRunner

    from refiner.cli import app

    load(limit=1)  # skips without the wheel
    res = CliRunner().invoke(app, ["eval", "--bench", "tier1", "--limit", "8", "--quiet", "--no-chart",
                                   "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["tier1"]["cases"] == 8 and summary["tier1"]["formats"] == formats.names()
    assert "## Tier 1 per error class and format" in (tmp_path / "report.md").read_text()
    assert "Per class and format, % fixed (default)" in (tmp_path / "tier1" / "tables.md").read_text()


# ----------------------------------------------------------------------------------------------------------------
# The full run


FULL_SAMPLE = 200  # records asked for, 25 per BFCL category (live_parallel has 16): 190 of the 2,351, five times
# the default sample. benchmarks/bench_tier1.py runs them all: with 52 formats, about 5 million inputs (640 records ran
# for over 17 CPU minutes here without finishing), more than CI's slow suite can spend on one test.


def full_suite_formats(every: int) -> list[str]:
    """Every ``every``-th format outside the XML grammar's rows, in registry order (1: all of them). A part of them
    leaves out the formats that write values as untyped text (their type drift is excused below): one of them in ten
    formats would weigh on the combined type-drift target as it does not in the full run, and a row added before
    one moves it into the part or out of it."""
    fmts = [f for f in formats.names() if f not in XML_ROW_FLOORS]
    if every > 1:
        fmts = [f for f in fmts if type(formats.get(f)).retype is formats.WireFormat.retype]
    return fmts[::every]


@pytest.mark.parametrize("every", [
    pytest.param(5, marks=pytest.mark.slow, id="fifth-of-the-formats"),
    pytest.param(1, marks=pytest.mark.long, id="every-format"),
])
def test_full_suite_meets_the_targets_in_every_format(every):
    result = ts.run_suite(load(limit=FULL_SAMPLE), fmts=full_suite_formats(every))
    assert result.n_cases == 190  # (the XML grammar's rows are measured apart, as on the default sample)
    verdicts = ts.check_targets(result, min_n=20)
    missed = [v.describe() for v in verdicts if not v.met and not v.target.name.startswith("format errors")]
    assert missed == []
    for f, (fixed, n) in ts.group_rates(result, "format").items():
        assert fixed / n >= FORMAT_SHORTFALLS.get(f, (0.95, ""))[0] - 0.03, (f, fixed, n)
    # the per-class targets hold in each format on its own too, except type drift in the formats that write values
    # as untyped text (GLM-4.5, Qwen3-Coder: ~34% with trust_spec): ["Paris"] for a string reads back as the string
    # '["Paris"]', which a string parameter takes, so nothing is left to see
    for t in ts.TARGETS:
        if t.combined or t.per_format:
            continue
        for row in t.rows:
            for f, c in result.tables[t.policy][row].items():
                if row == "value_type_drift" and type(formats.get(f)).retype is not formats.WireFormat.retype:
                    continue
                assert c["fixed"] / c["n"] >= t.floor, (t.name, row, f, c)
    assert not any(c["harmed"] for row, per in result.tables["default"].items() for f, c in per.items()
                   if (row, f) not in KNOWN_HARM)
