"""Tier 1 on real gold calls (NesTools, Glaive, API-Bank): correct calls pass through untouched, and the rule
corruptor's errors are repaired at measured rates per error class.

Each record's gold calls are rendered in the source's own wire format and corrupted once per error class with a
seeded RNG; the pipeline without a model (``Refiner()``: parse, gate, tier 1, guard) must give back text that parses
strictly to the gold calls. Rates are measured twice: with the default policy
(a call whose only findings are soft ones keeps its unknown parameters and its value types; see refiner.repair) and
with ``trust_spec=True`` (every spec believed, as for tools declared ``additionalProperties: false``).

Thresholds (on all records: NesTools 1,000, Glaive 153, API-Bank 597; a few points below the lowest source's rate):
- ``missing_tag``: the lenient parsers read calls without their tags → ≥ 95%.
- ``wrong_tag``: an opening tag mangled into ``[functioncall]`` / ``[nested function]`` is not recovered by those
  formats' lenient parsers → ≥ 75%.
- ``broken_json``: some edits ``json_repair`` cannot undo (a dropped quote that merges two strings, a dropped colon)
  → ≥ 75%.
- ``tool_name_typo`` and ``param_name_typo`` → ≥ 90% under both policies (param_name_typo's misses are short names
  whose typo is as close to a sibling as to the original, and, by default, a typo of an optional parameter that only
  changes case or separators: another spelling convention, left to the model).
- ``extra_param``: trusted → ≥ 85%; default 0% on every source, and asserted so: dropping a parameter the spec does
  not declare is exactly what made correct NESTFUL calls wrong.
- ``value_type_drift``: trusted → ≥ 85%; by default only booleans and JSON written as text are decoded (no floor),
  except on API-Bank, whose format writes every value as text → ≥ 90% there.
- ``missing_required_param`` and ``wrong_value``: tier 1 never invents a value, so it must fix none (0%).
The other classes (near-miss names, synonyms, wrong format, order) are reported, not asserted.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator

import pytest
from conftest import ROOT, shared_path

from data_gen import sources
from data_gen.corrupt import rules
from data_gen.sources.base import BadRecord
from refiner import formats
from refiner.calls import ToolCall, same_calls
from refiner.pipeline import Refiner
from refiner.repair import repair_calls
from refiner.specs import load_tools

PER_SOURCE = 150  # records per source in the default run (all of them under -m slow)
ASSERTED = {
    "missing_tag": 0.95,
    "wrong_tag": 0.75,
    "broken_json": 0.75,
    "tool_name_typo": 0.90,
    "param_name_typo": 0.90,
}
ASSERTED_TRUSTED = {"extra_param": 0.85, "value_type_drift": 0.85}  # with trust_spec=True only
ASSERTED_TEXT_VALUED = {"value_type_drift": 0.90}  # default policy, value style "text" (API-Bank)
# Sources whose gold writes every value as text, which they say to tier 1 (the request's value_style)
VALUE_STYLE = {"apibank": "text"}
NEVER_FIXED = ("missing_required_param", "wrong_value")
NEVER_FIXED_BY_DEFAULT = ("extra_param",)


def source_cases(source: str, records: list[dict]) -> Iterator[tuple[str, object, list[ToolCall]]]:
    """``(format, tools, gold calls)`` per record, read by the data builder's own source reader (a record it rejects
    is left out, as the builder leaves it out)."""
    fmt = formats.get(source).name  # each source here has a wire format of its own name
    normalise = sources.get(source).normalise
    for i, r in enumerate(records):
        try:
            sample = normalise(str(i), r)
        except BadRecord:
            continue
        yield fmt, sample.tools, sample.calls


def apibank_cases(levels: dict[int, list[dict]]) -> Iterator[tuple[str, object, list[ToolCall]]]:
    fmt = formats.get("apibank").name
    for lvl in sorted(levels):
        for r in levels[lvl]:
            answer = r["answer"] if isinstance(r["answer"], list) else [r["answer"]]
            yield fmt, r["system"], [ToolCall(a["name"], a.get("parameters") or {}) for a in answer]


@pytest.fixture(scope="module")
def all_cases(nestools_records, glaive_records, api_bank_levels) -> dict[str, list]:
    return {
        "nestools": list(source_cases("nestools", nestools_records)),
        "glaive": list(source_cases("glaive", glaive_records)),
        "apibank": list(apibank_cases(api_bank_levels)),
    }


# ----------------------------------------------------------------------------------------------------------------
# Correct calls are never harmed


@pytest.mark.parametrize("source, convention", [("nestools", "nestools"), ("glaive", "glaive"), ("apibank", "apibank")])
def test_gold_calls_are_not_touched(all_cases, source, convention):
    """Every gold call list, in the source's own value convention (API-Bank: every value a string): no repair."""
    harmed = []
    for i, (_, tools, gold) in enumerate(all_cases[source]):
        text_values = VALUE_STYLE.get(source) == "text"
        out, actions = repair_calls(gold, load_tools(tools), fmt=convention, text_values=text_values)
        if out != gold or actions:
            harmed.append((i, [a.message for a in actions]))
    assert len(all_cases[source]) > 100
    assert harmed == [], harmed[:5]


@pytest.mark.parametrize("source", ["nestools", "glaive", "apibank"])
def test_gold_text_passes_through_verbatim(all_cases, source):
    refiner = Refiner()
    cases = all_cases[source]
    style = VALUE_STYLE.get(source, "typed")
    requests = [{"tools": t, "upstream": formats.get(f).render(g), "format": f, "value_style": style}
                for f, t, g in cases]
    results = refiner.refine_batch(requests)
    harmed = [(i, r["stage"], r["reason"]) for i, r in enumerate(results) if r["changed"] or r["refined"] != requests[i]["upstream"]]
    assert harmed == [], harmed[:5]
    assert all(r["stage"] == "unchanged" for r in results)


# ----------------------------------------------------------------------------------------------------------------
# Corruptions are repaired at measured rates


def measure(cases: list, classes=rules.ERROR_CLASSES, seed: int = 0, *, trust_spec: bool = False,
            value_style: str = "typed") -> dict[str, tuple[int, int]]:
    """``{class: (corrupted, fixed)}``: fixed when the no-model pipeline's text parses strictly to the gold."""
    refiner = Refiner(trust_spec=trust_spec)
    stats: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for i, (fmt, tools, gold) in enumerate(cases):
        specs = load_tools(tools)
        for k, cls in enumerate(classes):
            try:
                bad = rules.corrupt(gold, fmt, specs, random.Random(seed + 1000 * i + k), classes=[cls])
            except rules.CorruptionError:
                continue  # the class does not apply to these calls
            res = refiner.refine({"tools": specs, "upstream": bad.text, "format": fmt, "value_style": value_style})
            try:
                fixed = same_calls(formats.get(fmt).parse_strict(res["refined"]), gold, formats.get(fmt))
            except formats.FormatError:
                fixed = False
            stats[cls][0] += 1
            stats[cls][1] += int(fixed)
    return {c: (n, ok) for c, (n, ok) in stats.items()}


def rate_table(source: str, fmt: str, stats: dict[str, tuple[int, int]], trusted: dict[str, tuple[int, int]]) -> str:
    rows = [f"{source} ({fmt}): class, corrupted, fixed by tier 1 (default policy, trust_spec=True)"]
    rows += [f"  {c:<24}{n:>6}{ok / n:>9.1%}{trusted[c][1] / n:>9.1%}" for c, (n, ok) in stats.items()]
    return "\n".join(rows)


def _floors(source: str, stats: dict[str, tuple[int, int]], floors: dict[str, float], policy: str) -> None:
    for cls, floor in floors.items():
        if cls in stats and stats[cls][0] >= 20:
            n, ok = stats[cls]
            assert ok / n >= floor, f"{source} ({policy}): {cls} fixed {ok}/{n} < {floor:.0%}"


def check_rates(source: str, cases: list) -> None:
    fmt = cases[0][0]
    style = VALUE_STYLE.get(source, "typed")
    stats = measure(cases, value_style=style)
    trusted = measure(cases, trust_spec=True, value_style=style)
    print("\n" + rate_table(source, fmt, stats, trusted))
    _floors(source, stats, ASSERTED, "default")
    _floors(source, trusted, {**ASSERTED, **ASSERTED_TRUSTED}, "trust_spec")
    if style == "text":
        _floors(source, stats, ASSERTED_TEXT_VALUED, "default")
    for cls in NEVER_FIXED:
        for st in (stats, trusted):
            if cls in st:
                assert st[cls][1] == 0, f"{source}: tier 1 'fixed' {cls}, so it invented a value"
    for cls in NEVER_FIXED_BY_DEFAULT:
        if cls in stats:
            assert stats[cls][1] == 0, f"{source}: tier 1 dropped a parameter its spec does not declare from a call " \
                                       "that was otherwise fine"
    assert sum(n for n, _ in stats.values()) > 0


@pytest.mark.parametrize("source", ["nestools", "glaive", "apibank"])
def test_corruptions_repaired_at_measured_rates(all_cases, source):
    check_rates(source, all_cases[source][:PER_SOURCE])


@pytest.mark.slow
@pytest.mark.parametrize("source", ["nestools", "glaive", "apibank"])
def test_corruptions_repaired_all_records(all_cases, source):
    check_rates(source, all_cases[source])



def test_the_repair_benchmark_runs_at_a_tiny_size():
    """benchmarks/bench_repair.py on 3 records per source: it reads its cases through this file's readers and prints
    its tables (the suite runs it nowhere else)."""
    shared = shared_path("nestools").parent
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_repair.py"), "--per-source", "3"],
                         capture_output=True, text=True, cwd=ROOT, check=False, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "TOOL_REFINER_SHARED_DATA": str(shared)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert "broken inputs (3 records per source" in res.stdout and "missing_tag" in res.stdout
