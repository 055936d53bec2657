"""Tier 1 measured per error class and per wire format, under both spec policies, on BFCL's gold calls.

Each BFCL record's gold (:func:`refiner.eval.bfcl_ast.first_answer`; every other record's specs given as OpenAI tools,
:func:`openai_tools`) is rendered in every format that carries it, left clean and corrupted one class at a time, and
refined without a model under the default policy and ``trust_spec``. Outcomes per input: ``fixed`` (parses strictly
to the gold), ``still_wrong``, ``harmed`` (a call the upstream had right is gone), ``untouched`` (a clean text comes
back as it went). :data:`VARIANTS` splits classes into what tier 1 can see and what it cannot tell from a right call;
:data:`TARGETS` are the bars the suite is held to."""

from __future__ import annotations

import copy
import random
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from data_gen.corrupt.labels import ERROR_CLASSES, ERROR_GROUPS, GROUP_OF
from refiner import formats
from refiner.calls import ToolCall, same_calls
from refiner.eval.bfcl import BFCL, CATEGORIES
from refiner.eval.common import corrupt_one, markdown_table, refine_all
from refiner.pipeline import Refiner
from refiner.repair import normalise_name
from refiner.specs import load_tools

SPEC_STYLES = ("bfcl", "openai")  # alternate records: BFCL's own dialect, OpenAI tools (JSON Schema)
POLICIES = ("default", "trust_spec")
CLEAN = "clean"

# Classes split by what the corruptor wrote: class -> its variants, the one tier 1 can fix first. look-alike: a name
# no tool has, offered: another tool's; undeclared: a parameter the spec lacks, declared: an optional one set unasked;
# respelt: the right value in another case or punctuation, other: another value (never invented).
VARIANTS: dict[str, tuple[str, str]] = {
    "tool_name_near_miss": ("look-alike", "offered"),
    "extra_param": ("undeclared", "declared"),
    "wrong_value": ("respelt", "other"),
}


def row_names(classes: Iterable[str] = ERROR_CLASSES) -> list[str]:
    """The table rows: each class, or for a split class each ``class/variant``."""
    return [row for c in classes for row in ([f"{c}/{v}" for v in VARIANTS[c]] if c in VARIANTS else [c])]


_OPENAI_TYPES = {  # BFCL's own mapping for OpenAI-style models (bfcl_eval GORILLA_TO_OPENAPI)
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object", "tuple": "array",
    "any": "string", "byte": "integer", "short": "integer", "long": "integer", "double": "number", "char": "string",
    "ArrayList": "array", "Array": "array", "HashMap": "object", "Hashtable": "object", "Queue": "array",
    "Stack": "array", "Any": "string", "String": "string", "Bigint": "integer",
}


def openai_name(name: str) -> str:
    """A BFCL function name as OpenAI tools must spell it (``^[a-zA-Z0-9_-]+$``): BFCL writes dots as underscores."""
    return name.replace(".", "_")


def _openai_schema(prop: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(prop)
    t = out.get("type")
    if t == "float":
        out["format"] = "float"
    out["type"] = _OPENAI_TYPES.get(t, "string") if isinstance(t, str) else "string"  # untyped: BFCL says string
    if isinstance(out.get("properties"), Mapping):
        out["properties"] = {k: _openai_schema(v) if isinstance(v, Mapping) else v
                             for k, v in out["properties"].items()}
    if isinstance(out.get("items"), Mapping):
        out["items"] = _openai_schema(out["items"])
    return out


def openai_tools(functions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """BFCL functions as an OpenAI ``tools`` list, by BFCL's own rules for OpenAI-style models (dots in names as
    underscores, types mapped by ``_OPENAI_TYPES``, untyped parameters as strings, nested properties and items too)."""
    tools = []
    for f in functions:
        fn = copy.deepcopy(dict(f))
        fn["name"] = openai_name(str(fn.get("name", "")))
        params = {**(fn.get("parameters") or {}), "type": "object"}
        fn["parameters"] = _openai_schema({**params, "properties": params.get("properties") or {}})
        tools.append({"type": "function", "function": fn})
    return tools


@dataclass
class SuiteCase:
    """One BFCL record: its tools as given to tier 1 (BFCL's functions or OpenAI tools, ``style``), the specs read
    from them, and one correct call list (names as that style spells them)."""

    id: str
    category: str
    style: str
    tools: list[dict]
    specs: list[Any]
    gold: list[ToolCall]

    @cached_property
    def index(self) -> dict[str, Any]:
        """The specs by name."""
        return {s.name: s for s in self.specs}


def load_cases(wheel: str | Path | None = None, categories: Sequence[str] = CATEGORIES, limit: int | None = None,
               seed: int = 0) -> list[SuiteCase]:
    """BFCL records (as :class:`refiner.eval.bfcl.BFCL` reads them) as suite cases, ``limit`` spread over the
    categories (default all); every other record's specs (which ones: seeded) as OpenAI tools. ``ValueError`` names a
    record that cannot be read."""
    offset = random.Random(f"tier1-suite-{seed}").randrange(2)  # which style the first record gets
    cases: list[SuiteCase] = []
    for item in BFCL(wheel, tuple(categories)).load(limit):
        style = SPEC_STYLES[(len(cases) + offset) % 2]
        tools, gold = item.tools, item.gold_calls
        if style == "openai":
            tools = openai_tools(tools)
            gold = [ToolCall(openai_name(c.name), dict(c.arguments)) for c in gold]
        try:
            specs = load_tools(tools)
        except Exception as e:  # noqa: BLE001 - the spec loader's error, with the record named
            raise ValueError(f"{item.id} ({style} specs): {e}") from None
        cases.append(SuiteCase(item.id.removeprefix("bfcl-"), item.subset, style, tools, specs, gold))
    return cases


@dataclass
class SuiteInput:
    case: SuiteCase
    fmt: str
    row: str  # "clean", an error class, or "class/variant"
    text: str
    gold: list[ToolCall]  # the gold as this format carries it


@dataclass
class Inputs:
    items: list[SuiteInput] = field(default_factory=list)
    cannot_carry: dict[str, Counter] = field(default_factory=dict)  # format -> reason -> records
    not_applicable: dict[str, Counter] = field(default_factory=dict)  # format -> class -> records
    carried: Counter = field(default_factory=Counter)  # format -> records it carries


def read_calls(fmt: str, text: str, specs: Mapping[str, Any], strict: bool = True) -> list[ToolCall]:
    """The calls of ``text`` read in ``fmt`` (strictly: ``FormatError`` otherwise), values typed by the specs where the
    format writes them as untyped text (:meth:`refiner.formats.WireFormat.retype`, as the gate reads them)."""
    f = formats.get(fmt)
    return list(f.retype(f.parse_strict(text) if strict else f.parse_lenient(text).calls, specs))


def carry(calls: Sequence[ToolCall], fmt: str, specs: Mapping[str, Any] | None = None
          ) -> tuple[list[ToolCall] | None, str]:
    """``(the calls as the format reads them back, "")`` when ``fmt`` can carry them, else ``(None, reason)``;
    ``specs`` (by name) type the values of formats that write them as text."""
    f = formats.get(fmt)
    try:
        back = read_calls(fmt, f.render(list(calls)), specs or {})
    except formats.RenderError:
        return None, "render error"
    except formats.FormatError:
        return None, "unreadable rendering"
    if not same_calls(back, list(calls), f):
        return None, "names only" if f.names_only else "reads back other calls"
    return back, ""


def _variant(cls: str, gold: Sequence[ToolCall], bad: Sequence[ToolCall], specs: Mapping[str, Any]) -> str | None:
    if cls == "tool_name_near_miss":
        changed = [b.name for g, b in zip(gold, bad) if g.name != b.name]
        return "offered" if changed and changed[0] in specs else "look-alike"
    if cls == "wrong_value":
        for g, b in zip(gold, bad):
            for k, v in b.arguments.items():
                if k in g.arguments and g.arguments[k] != v:
                    return "respelt" if _spelling(g.arguments[k]) == _spelling(v) else "other"
        return "other"
    if cls == "extra_param":
        for g, b in zip(gold, bad):
            added = [k for k in b.arguments if k not in g.arguments]
            if added:
                spec = specs.get(b.name)
                return "declared" if spec is not None and added[0] in (spec.params or {}) else "undeclared"
        return "undeclared"
    return None


def _spelling(value: Any, depth: int = 0) -> Any:
    """A value with every text reduced to its letters and digits in lower case (:func:`normalise_name`)."""
    if depth > 32:
        return None
    if isinstance(value, str):
        return ("s", normalise_name(value))
    if isinstance(value, list):
        return ("l", tuple(_spelling(v, depth + 1) for v in value))
    if isinstance(value, Mapping):
        return ("d", tuple(sorted((str(k), _spelling(v, depth + 1)) for k, v in value.items())))
    return (type(value).__name__, value)


def make_inputs(cases: Sequence[SuiteCase], fmts: Sequence[str] | None = None,
                classes: Sequence[str] = ERROR_CLASSES, seed: int = 0) -> Inputs:
    """Every case in every format (default: all registered) that carries its gold: the clean rendering and one seeded
    corruption per class that applies."""
    fmts = list(fmts) if fmts is not None else list(formats.names())
    out = Inputs(cannot_carry={f: Counter() for f in fmts}, not_applicable={f: Counter() for f in fmts})
    for case in cases:
        specs = case.index
        for fmt in fmts:
            gold, why = carry(case.gold, fmt, specs)
            if gold is None:
                out.cannot_carry[fmt][why] += 1
                continue
            out.carried[fmt] += 1
            out.items.append(SuiteInput(case, fmt, CLEAN, formats.get(fmt).render(gold), gold))
            for cls in classes:
                rng = random.Random(f"{seed}-{case.id}-{fmt}-{cls}")
                bad, skipped = corrupt_one(gold, fmt, case.specs, rng, cls)
                try:  # a text that reads back as the gold (typed by the specs) changed only what the format omits
                    hidden = bad is not None and same_calls(read_calls(fmt, bad.text, specs), gold, formats.get(fmt))
                except formats.FormatError:
                    hidden = False
                if hidden:
                    bad, skipped = None, f"{cls} (not visible in the format)"
                if bad is None:
                    out.not_applicable[fmt][skipped] += 1
                    continue
                variant = _variant(cls, gold, bad.calls or [], specs)
                row = f"{cls}/{variant}" if variant else cls
                out.items.append(SuiteInput(case, fmt, row, bad.text, gold))
    return out


def _multiset(calls: Iterable[ToolCall]) -> Counter:
    return Counter(c.key() for c in calls)


def judge(item: SuiteInput, refined: str, changed: bool) -> dict[str, int]:
    """The outcome counters of one refined text."""
    f = formats.get(item.fmt)
    specs = item.case.index
    try:
        got = read_calls(item.fmt, refined, specs)
        correct = same_calls(got, item.gold, f)
    except formats.FormatError:
        got, correct = read_calls(item.fmt, refined, specs, strict=False), False
    gold = _multiset(item.gold)
    right_before = _multiset(read_calls(item.fmt, item.text, specs, strict=False)) & gold
    kept = right_before & _multiset(got)
    harmed_calls = sum(right_before.values()) - sum(kept.values())
    out = {"n": 1, "harmed": int(harmed_calls > 0), "harmed_calls": harmed_calls}
    if item.row == CLEAN:
        return {**out, "untouched": int(not changed and refined == item.text), "correct": int(correct)}
    return {**out, "fixed": int(correct), "still_wrong": int(not correct)}


Table = dict[str, dict[str, Counter]]  # row -> format -> counters


@dataclass
class SuiteResult:
    tables: dict[str, Table]  # policy -> table
    inputs: Inputs
    n_cases: int
    categories: dict[str, int]
    styles: dict[str, int]
    fmts: list[str]
    seconds: dict[str, float] = field(default_factory=dict)  # policy -> time in the pipeline (refine_batch)


def run_suite(cases: Sequence[SuiteCase], *, fmts: Sequence[str] | None = None,
              classes: Sequence[str] = ERROR_CLASSES, seed: int = 0, policies: Sequence[str] = POLICIES,
              progress: bool = False) -> SuiteResult:
    """Builds the inputs (:func:`make_inputs`) and runs the no-model pipeline on each under each policy."""
    inputs = make_inputs(cases, fmts, classes, seed)
    tables: dict[str, Table] = {}
    seconds: dict[str, float] = {}
    for policy in policies:
        if policy not in POLICIES:
            raise ValueError(f"unknown spec policy {policy!r}; known: {POLICIES}")
        refiner = Refiner(trust_spec=policy == "trust_spec")
        requests = [{"tools": it.case.specs, "upstream": it.text, "format": it.fmt} for it in inputs.items]
        t0 = time.perf_counter()
        results = refine_all(refiner, requests, f"tier-1 suite ({policy})", progress)
        seconds[policy] = time.perf_counter() - t0
        tables[policy] = table = {}
        for it, res in zip(inputs.items, results):
            got = judge(it, res.get("refined", ""), bool(res.get("changed")))
            table.setdefault(it.row, {}).setdefault(it.fmt, Counter()).update(got)
    return SuiteResult(tables=tables, inputs=inputs, n_cases=len(cases), fmts=list(inputs.cannot_carry),
                       categories=dict(Counter(c.category for c in cases)), seconds=seconds,
                       styles=dict(Counter(c.style for c in cases)))


@dataclass(frozen=True)
class Target:
    """A bar: ``metric`` at least ``floor`` under ``policy``, for each of ``rows`` summed over formats, for the rows
    together (``combined``), or for each row in every format on its own (``per_format``)."""

    name: str
    policy: str
    rows: tuple[str, ...]
    floor: float
    metric: str = "fixed"
    per_format: bool = False
    combined: bool = False


TARGETS: tuple[Target, ...] = (
    Target("correct calls untouched in every format (default policy)", "default", (CLEAN,), 1.0, "untouched",
           per_format=True),
    Target("format errors fixed (default policy)", "default", ERROR_GROUPS["format"], 0.95, combined=True),
    Target("tool-name errors fixed (default policy)", "default", ("tool_name_typo", "tool_name_near_miss/look-alike"),
           0.90),
    Target("name and content errors tier 1 can fix, each (trust_spec)", "trust_spec",
           ("tool_name_typo", "tool_name_near_miss/look-alike", "param_name_typo", "value_type_drift",
            "extra_param/undeclared"), 0.90),
)

# Rows tier 1 must never count as fixed: it never invents a value.
NEVER_FIXED = ("missing_required_param", "wrong_value/other")


@dataclass
class Verdict:
    target: Target
    met: bool
    rates: dict[str, tuple[int, int]]  # row (or row@format) -> (hits, n)

    def describe(self) -> str:
        parts = []
        for key, (hits, n) in self.rates.items():
            below = n and hits / n < self.target.floor
            flag = "" if not below else " (below)" if self.target.combined and key != "together" else " MISSED"
            parts.append(f"{key} {_pct(hits, n)}{flag}")
        return f"[{'met' if self.met else 'MISSED'}] {self.target.name} >= {self.target.floor:.0%}: " + ", ".join(parts)


def row_total(table: Table, row: str) -> Counter:
    """One row's counters summed over formats."""
    return sum(table.get(row, {}).values(), Counter())


def check_targets(result: SuiteResult, targets: Sequence[Target] = TARGETS, min_n: int = 1) -> list[Verdict]:
    """Each target's verdict (a row with fewer than ``min_n`` inputs is not judged)."""
    out = []
    for t in targets:
        table = result.tables.get(t.policy)
        if table is None:
            continue
        rates: dict[str, tuple[int, int]] = {}
        for row in t.rows:
            if t.per_format:
                for fmt, c in sorted(table.get(row, {}).items()):
                    rates[f"{row}@{fmt}"] = (c[t.metric], c["n"])
            else:
                c = row_total(table, row)
                rates[row] = (c[t.metric], c["n"])
        judged = rates
        if t.combined:
            judged = {"together": (sum(h for h, _ in rates.values()), sum(n for _, n in rates.values()))}
        met = all(n < min_n or hits / n >= t.floor for hits, n in judged.values())
        out.append(Verdict(t, met, {**judged, **rates} if t.combined else rates))
    return out


def _metric(row: str) -> str:
    """The counter a row is judged by: texts returned as they came for the clean row, else errors fixed."""
    return "untouched" if row == CLEAN else "fixed"


def _pct(hits: int, n: int) -> str:
    return f"{hits / n:.1%}" if n else "-"


def _short_pct(hits: int, n: int) -> str:
    if not n:
        return "-"
    r = hits / n
    return "100" if hits == n else f"{100 * r:.0f}" if r >= 0.1 else f"{100 * r:.1f}"


def class_table(result: SuiteResult) -> str:
    """Per class, summed over formats: fixed / harmed under each policy, and the worst formats (default policy)."""
    pol = [p for p in POLICIES if p in result.tables]
    header = ["row", "group", "n", *(f"{k} ({p})" for p in pol for k in ("fixed", "harmed")), "worst formats (default)"]
    lines = []
    for row in [CLEAN, *row_names()]:
        first = result.tables[pol[0]]
        if row not in first:
            continue
        n = row_total(first, row)["n"]
        metric = _metric(row)
        cells = []
        for p in pol:
            c = row_total(result.tables[p], row)
            cells += [_pct(c[metric], c["n"]), str(c["harmed"])]
        default = result.tables.get("default", first)
        worst = sorted(((c[metric] / c["n"], fmt) for fmt, c in default.get(row, {}).items() if c["n"]))[:3]
        worst_text = ", ".join(f"{fmt} {r:.0%}" for r, fmt in worst if r < 1.0) or "none below 100%"
        group = "-" if row == CLEAN else GROUP_OF[row.split("/", 1)[0]]
        label = f"{row} (untouched)" if row == CLEAN else row
        lines.append([label, group, str(n), *cells, worst_text])
    return markdown_table(header, lines)


def group_rates(result: SuiteResult, group: str = "format", policy: str = "default") -> dict[str, tuple[int, int]]:
    """Per format: ``(fixed, n)`` over the rows of one error group (``format``, ``name``, ...), under ``policy``."""
    table, rows = result.tables.get(policy, {}), row_names(ERROR_GROUPS[group])
    return {f: (c["fixed"], c["n"]) for f in result.fmts
            if (c := sum((table.get(row, {}).get(f, Counter()) for row in rows), Counter()))["n"]}


def matrix_table(result: SuiteResult, policy: str) -> str:
    """Row × format: % fixed (``untouched`` for the clean row); ``-`` where the class does not apply."""
    table = result.tables[policy]
    fmts = [f for f in result.fmts if result.inputs.carried[f]]
    lines = []
    for row in [CLEAN, *row_names()]:
        if row not in table:
            continue
        metric = _metric(row)
        cells = [_short_pct(c[metric], c["n"]) if (c := table[row].get(f)) else "-" for f in fmts]
        lines.append([row, *cells])
    return markdown_table(["row", *fmts], lines)


def coverage_table(result: SuiteResult) -> str:
    """Per format: records carried, records skipped (and why), inputs, classes that did not apply."""
    lines = []
    for f in result.fmts:
        skipped = result.inputs.cannot_carry.get(f, Counter())
        why = ", ".join(f"{k}: {v}" for k, v in skipped.most_common()) or "0"
        n_inputs = sum(1 for it in result.inputs.items if it.fmt == f)
        na = result.inputs.not_applicable.get(f, Counter())
        na_text = ", ".join(f"{k} {v}" for k, v in sorted(na.items())) or "none"
        lines.append([f, str(result.inputs.carried[f]), why, str(n_inputs), na_text])
    header = ["format", "records carried", "skipped (reason)", "inputs", "classes not applicable (records)"]
    return markdown_table(header, lines)


def render_tables(result: SuiteResult, *, matrices: bool = True) -> str:
    """The suite's report: coverage, per-class table, per-format matrices, target verdicts."""
    cats = ", ".join(f"{k} {v}" for k, v in result.categories.items())
    styles = ", ".join(f"{k} {v}" for k, v in result.styles.items())
    parts = [
        (f"Tier-1 suite: {result.n_cases} BFCL records ({cats}); specs: {styles}; "
         f"{len(result.inputs.items)} inputs in {sum(1 for f in result.fmts if result.inputs.carried[f])} formats"),
        "",
        "Coverage",
        coverage_table(result),
        "",
        ("Per class over all formats (fixed: parses strictly to the gold; harmed: inputs where a call the upstream "
         "had right was changed; clean row: texts returned as they came)"),
        class_table(result),
    ]
    worst = {g: sorted((h / n, f) for f, (h, n) in group_rates(result, g).items())[:5]
             for g in ("format", "name", "content")}
    parts += ["", "Lowest formats per error group (default policy): " + "; ".join(
        f"{g}: " + ", ".join(f"{f} {r:.0%}" for r, f in rates) for g, rates in worst.items())]
    if matrices:
        for p in result.tables:
            parts += ["", f"Per class and format, % fixed ({p})", matrix_table(result, p)]
    parts += ["", "Targets", *(v.describe() for v in check_targets(result))]
    never = [f"{row} ({p}): fixed {c['fixed']} of {c['n']}" for p, table in result.tables.items()
             for row in NEVER_FIXED if (c := row_total(table, row))["n"]]
    parts += ["", "Never fixed by tier 1 (it invents no value): " + "; ".join(never)]
    return "\n".join(parts)


def summary(result: SuiteResult) -> dict[str, Any]:
    """The tables as JSON: policy -> row -> format -> counters, plus coverage and target verdicts."""
    return {
        "cases": result.n_cases, "categories": result.categories, "spec_styles": result.styles, "formats": result.fmts,
        "carried": dict(result.inputs.carried),
        "cannot_carry": {f: dict(c) for f, c in result.inputs.cannot_carry.items()},
        "not_applicable": {f: dict(c) for f, c in result.inputs.not_applicable.items()},
        "tables": {p: {row: {f: dict(c) for f, c in per.items()} for row, per in t.items()}
                   for p, t in result.tables.items()},
        "targets": [{"target": v.target.name, "met": v.met,
                     "rates": {k: {"hits": h, "n": n} for k, (h, n) in v.rates.items()}}
                    for v in check_targets(result)],
    }

