"""``report.md`` in the paper's table layouts, and a bar chart of raw vs refined per benchmark. Δ is the paper's
relative improvement, ``(refined - raw) / raw``."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from refiner.eval import tier1_suite
from refiner.eval.common import markdown_table

METRIC_NAMES = {"acc": "Acc.", "part_acc": "Part. Acc.", "full_acc": "Full Acc.", "win_rate": "Win Rate",
                "acc_full": "Acc_Full", "acc_toolname": "Acc_Toolname", "acc_parameter": "Acc_Parameter"}


def relative_delta(raw: float, refined: float) -> str:
    if raw is None or refined is None or math.isnan(raw) or math.isnan(refined):
        return "n/a"
    if raw == 0:
        return "n/a" if refined == 0 else "n/a (raw 0)"
    return f"{(refined - raw) / raw * 100:+.2f}%"


def _fmt(v: Any, percent: bool) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v * 100:.2f}" if percent else f"{v:.2f}"


def _name(metric: str) -> str:
    return METRIC_NAMES.get(metric, metric)


def bench_section(result: Any, upstream_name: str, refiner_name: str) -> str:
    """One benchmark's table(s): overall metrics with Δ, then the headline metric per subset."""
    b = result.bench
    head = b.metrics[0]
    subsets = [k for k in result.raw if k != "overall"]
    n = int(result.raw["overall"]["n"])
    parts = [f"## {b.title or b.name}", "", f"{n} samples; scores {'in %' if b.percent else 'on 0-1'}."]
    versions = [(f"{upstream_name} (Raw)", result.raw, "-")]
    if result.refined is not None:
        delta = relative_delta(result.raw["overall"][head], result.refined["overall"][head])
        versions.append((f"{upstream_name} (w/ {refiner_name})", result.refined, delta))
    if len(b.metrics) == 1:
        header = ["Model", f"Overall {_name(head)}", "Δ", *subsets]
        rows = [[name, _fmt(summ["overall"][head], b.percent), delta,
                 *(_fmt(summ[s][head], b.percent) for s in subsets)] for name, summ, delta in versions]
    else:
        header = ["Model", *(_name(m) for m in b.metrics), f"Δ ({_name(head)})"]
        rows = [[name, *(_fmt(summ["overall"][m], b.percent) for m in b.metrics), delta]
                for name, summ, delta in versions]
    parts += ["", markdown_table(header, rows)]
    if len(b.metrics) > 1 and subsets:
        header = ["Subset", "n", *(f"{_name(m)} raw → refined" for m in b.metrics)]
        rows = [[s, str(int(result.raw[s]["n"])),
                 *(f"{_fmt(result.raw[s][m], b.percent)} → "
                   f"{_fmt(result.refined[s][m], b.percent) if result.refined else '–'}" for m in b.metrics)]
                for s in subsets]
        parts += ["", markdown_table(header, rows)]
    notes = [f"{_name(k[:-2])}: computed on {int(v)} of {n} samples"
             for k, v in result.raw["overall"].items() if k.endswith("_n")]
    if notes:
        parts += ["", "Note: " + "; ".join(notes) + "."]
    quirks = getattr(b, "notes", None) or []
    if quirks:
        parts += ["", f"Data quirks ({len(quirks)}): " + "; ".join(quirks[:5]) + (" ..." if len(quirks) > 5 else "")]
    if result.refined is not None:
        stages = Counter(str(row.get("stage")) for row in result.rows)
        parts += ["", "Pipeline stages: " + ", ".join(f"{k} {v}" for k, v in sorted(stages.items())) + "."]
        errors = [row for row in result.rows if row.get("error")]
        if errors:
            parts += ["", f"Not refined ({len(errors)}, upstream kept and scored as refined): "
                      + "; ".join(f"{row['id']}: {row['error'][:160]}" for row in errors[:3])
                      + (" ..." if len(errors) > 3 else "")]
    return "\n".join(parts)


def recovery_section(recovery: Mapping[str, Any]) -> str:
    """The recovery table; with several tier-1 spec policies (``{"off": result, "on": result}``), their columns side
    by side (the inputs are the same, so ``n`` is shared)."""
    policies = list(recovery)
    first = recovery[policies[0]]
    cols = ["fixed", "still wrong", "harmed", "fixed %"]
    header = ["Error class", "n", *(c if len(policies) == 1 else f"{c} (trust_spec {p})" for p in policies
                                    for c in cols)]
    rows = []
    for cls, t in first.table.items():
        cells = [cls, str(t["n"])]
        for p in policies:
            t = recovery[p].table.get(cls, {"fixed": 0, "still_wrong": 0, "harmed": 0})
            corrupted = t["fixed"] + t["still_wrong"]
            cells += [str(t["fixed"]), str(t["still_wrong"]), str(t["harmed"]),
                      f"{t['fixed'] / corrupted * 100:.1f}" if corrupted else "–"]
        rows.append(cells)
    policy_text = ("Tier-1 spec policy: trust_spec " + policies[0] + "." if len(policies) == 1 else
                   "Both tier-1 spec policies on the same inputs: trust_spec off (a spec is believed only where that "
                   "cannot make a correct call wrong) and on (every spec treated as exact).")
    return "\n".join([
        "## Corruption recovery",
        "",
        "Gold calls of each source, corrupted by the rule corruptor (one error class per sample) or left clean, then "
        "refined. fixed: a corrupted input refined to the gold calls; still wrong: not; harmed: a clean input made "
        "wrong by the refiner. " + policy_text,
        "",
        markdown_table(header, rows),
        *(["\nNot corruptible (class → samples passed on to the next class): "
           + ", ".join(f"{k} {v}" for k, v in sorted(first.skipped.items()))] if first.skipped else []),
        *[f"\nNot refined (trust_spec {p}): {n} input(s) the refiner failed on, kept as they were and counted "
          "above as still wrong (clean: kept)." for p, n in
          ((p, sum(row.get("stage") == "error" for row in recovery[p].rows)) for p in policies) if n],
    ])


def tier1_section(result: Any) -> str:
    """The tier-1 suite: coverage, per class over all formats under both policies, and the targets (the per-format
    tables are in ``tier1/tables.md``)."""
    intro = (f"{result.n_cases} BFCL records, their gold calls rendered in every wire format that can carry them and "
             "corrupted one error class at a time; the pipeline without a model refines each under the default spec "
             "policy and with trust_spec. fixed: the refined text parses strictly to the gold; harmed: inputs where a "
             "call the upstream had right was changed; clean: texts returned as they came. Per-format tables: "
             "tier1/tables.md.")
    return "\n".join(["## Tier 1 per error class and format (BFCL's gold calls)", "", intro, "",
                      tier1_suite.coverage_table(result), "", tier1_suite.class_table(result), "",
                      *(f"- {v.describe()}" for v in tier1_suite.check_targets(result))])


def render_report(results: Sequence[Any], recovery: Mapping[str, Any] | None = None,
                  meta: Mapping[str, Any] | None = None, tier1: Any = None) -> str:
    meta = dict(meta or {})
    upstream = str(meta.get("upstream", "upstream"))
    refiner = str(meta.get("refiner", "Refiner"))
    parts = ["# Tool-refiner evaluation", "", *(f"- **{k}**: {v}" for k, v in meta.items())]
    for r in results:
        parts += ["", bench_section(r, upstream, refiner)]
    if recovery:
        parts += ["", recovery_section(recovery)]
    if tier1 is not None:
        parts += ["", tier1_section(tier1)]
    if results:
        parts += ["", "![raw vs refined](chart.png)"]
    return "\n".join(parts) + "\n"


def bar_chart(results: Sequence[Any], path: str | Path) -> Path | None:
    """Grouped bars (raw, refined) of each benchmark's headline metric on a 0-100 scale; None without matplotlib or
    results."""
    if not results:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    labels = [f"{r.bench.name}\n{_name(r.bench.metrics[0])}" for r in results]
    raw = [r.raw["overall"][r.bench.metrics[0]] * 100 for r in results]
    ref = [(r.refined["overall"][r.bench.metrics[0]] * 100) if r.refined else 0.0 for r in results]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.8 * len(results)), 3.6))
    xs = range(len(results))
    w = 0.38
    ax.bar([x - w / 2 for x in xs], raw, w, label="raw")
    if any(r.refined for r in results):
        ax.bar([x + w / 2 for x in xs], ref, w, label="refined")
    ax.set(xticks=list(xs), ylabel="score (0-100)", ylim=(0, 100))
    ax.set_xticklabels(labels, fontsize=8)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
