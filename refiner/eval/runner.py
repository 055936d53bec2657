"""Running the benchmarks: score the upstream outputs, refine them, score again, and write the results folder
(its layout: docs/evaluation.md)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from refiner.eval import report
from refiner.eval.apibank import APIBank
from refiner.eval.bamboogle import BamboogleStar
from refiner.eval.bfcl import BFCL, CATEGORIES
from refiner.eval.common import REFINER_FAILED, BenchItem, Benchmark, refine_all, write_jsonl
from refiner.eval.nestful import NESTFUL
from refiner.eval.recovery import run_recovery, spec_policy
from refiner.eval.tier1_suite import SuiteResult, load_cases, render_tables, run_suite
from refiner.eval.tier1_suite import summary as tier1_summary
from refiner.eval.upstream import endpoint_outputs, read_outputs_file, scripted_outputs


@dataclass
class BenchResult:
    """One benchmark's samples, per-sample rows and summaries (``refined`` is None when no refiner ran)."""

    bench: Benchmark
    items: list[BenchItem]
    rows: list[dict]
    raw: dict[str, dict]
    refined: dict[str, dict] | None


def refine_outputs(refiner: Any, items: Sequence[BenchItem], outputs: Mapping[str, str], bench: Benchmark,
                   progress: bool = True) -> list[dict]:
    """The pipeline's result for every sample (in order), with ``refined`` after the benchmark's post-processing.
    A request the pipeline cannot read becomes an error result (its upstream text passed through), never dropped."""
    results = refine_all(refiner, [s.refine_request(outputs[s.id]) for s in items], f"refine {bench.name}", progress)
    results = [{**res, "refined": bench.postprocess_refined(s, res.get("refined", ""))}
               for s, res in zip(items, results)]
    failed = [r for r in results if str(r.get("error", "")).startswith(REFINER_FAILED)]
    if len(results) > 1 and len(failed) == len(results):
        raise RuntimeError(f"{bench.name}: the refiner failed on every sample, e.g. {failed[0]['error']}")
    return results


def evaluate(bench: Benchmark, items: Sequence[BenchItem], outputs: Mapping[str, str], refiner: Any = None,
             progress: bool = True) -> BenchResult:
    """Raw scores of ``outputs`` and, when a refiner is given, refined scores."""
    items = list(items)
    missing = [s.id for s in items if s.id not in outputs]
    if missing:
        raise ValueError(f"{bench.name}: no upstream output for {len(missing)} sample(s), e.g. {missing[:5]}")
    refined = refine_outputs(refiner, items, outputs, bench, progress) if refiner is not None else None
    rows, raw_scores, ref_scores = [], [], []
    for i, s in enumerate(tqdm(items, desc=f"score {bench.name}", disable=not progress, leave=False)):
        raw = bench.score(s, outputs[s.id])
        raw_scores.append(raw)
        row = {"id": s.id, "subset": s.subset, "upstream": outputs[s.id], "raw": raw}
        if refined is not None:
            res = refined[i]
            sc = bench.score(s, res["refined"])
            ref_scores.append(sc)
            row.update(refined=res["refined"], stage=res.get("stage"), changed=res.get("changed"), scores=sc)
            if res.get("error"):
                row["error"] = res["error"]
        rows.append(row)
    return BenchResult(bench, items, rows, raw=bench.summarize(items, raw_scores),
                       refined=bench.summarize(items, ref_scores) if refined is not None else None)


def write_results(results: Sequence[BenchResult], out_dir: str | Path, meta: Mapping[str, Any] | None = None,
                  recovery: Mapping[str, Any] | None = None, chart: bool = True,
                  tier1: SuiteResult | None = None) -> Path:
    """Writes per-sample outputs, ``summary.json``, ``report.md`` and ``chart.png``; returns the report path.
    ``recovery`` maps a spec policy (``"off"``/``"on"``) to its recovery result."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"meta": dict(meta or {}), "benchmarks": {}}
    for r in results:
        write_jsonl(out / r.bench.name / "outputs.jsonl", r.rows)
        summary["benchmarks"][r.bench.name] = {"raw": r.raw, "refined": r.refined}
    if recovery:
        write_jsonl(out / "recovery" / "outputs.jsonl",
                    ({**row, "trust_spec": policy} for policy, res in recovery.items() for row in res.rows))
        summary["recovery"] = {policy: res.table for policy, res in recovery.items()}
    if tier1 is not None:
        (out / "tier1").mkdir(exist_ok=True)
        (out / "tier1" / "tables.md").write_text(render_tables(tier1) + "\n", encoding="utf-8")
        summary["tier1"] = tier1_summary(tier1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n",
                                      encoding="utf-8")
    path = out / "report.md"
    path.write_text(report.render_report(results, recovery=recovery, meta=meta, tier1=tier1), encoding="utf-8")
    if chart:
        report.bar_chart(results, out / "chart.png")
    return path


BENCH_NAMES = ("apibank", "nestful", "bamboogle", "bfcl")
RECOVERY = "recovery"
TIER1 = "tier1"  # the tier-1 suite (refiner.eval.tier1_suite): BFCL's gold, every format, both spec policies
NO_UPSTREAM = (RECOVERY, TIER1)  # benchmarks that make their own inputs


def check_upstream(benches: Sequence[str], *upstreams: Any) -> None:
    """``ValueError`` unless every benchmark is known and exactly one of ``upstreams`` is given where one is needed."""
    unknown = [b for b in benches if b not in (*BENCH_NAMES, *NO_UPSTREAM)]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; known: {', '.join((*BENCH_NAMES, *NO_UPSTREAM))}")
    if any(b not in NO_UPSTREAM for b in benches) and sum(u is not None for u in upstreams) != 1:
        raise ValueError("give exactly one upstream: a file, an endpoint (base URL + model) or scripted")


def make_benchmark(name: str, *, data_dir: str | Path | None = None, bfcl_wheel: str | Path | None = None,
                   bfcl_categories: Sequence[str] | None = None, bfcl_format: str = "toolace",
                   apibank_adjustments: bool = True, seed: int = 0) -> Benchmark:
    if name == "apibank":
        return APIBank(data_dir, adjustments=apibank_adjustments)
    if name == "nestful":
        return NESTFUL(data_dir, seed=seed)
    if name == "bamboogle":
        return BamboogleStar(data_dir, seed=seed)
    if name == "bfcl":
        return BFCL(bfcl_wheel, tuple(bfcl_categories or CATEGORIES), fmt=bfcl_format)
    raise ValueError(f"unknown benchmark {name!r}; known: {', '.join((*BENCH_NAMES, *NO_UPSTREAM))}")


def run_eval(benches: Sequence[str], out_dir: str | Path, *, refiner: Any = None,
             upstream_file: str | Path | None = None, upstream_base_url: str | None = None,
             upstream_model: str | None = None, upstream_engine: Any = None, upstream_scripted: float | None = None,
             upstream_settings: Mapping[str, Any] | None = None, cache_file: str | Path | None = None,
             limit: int | None = None, recovery_sources: Sequence[str] = BENCH_NAMES, clean_ratio: float = 0.15,
             recovery_trust_spec: Sequence[bool] | None = None, seed: int = 0, meta: Mapping[str, Any] | None = None,
             progress: bool = True, chart: bool = True, **bench_options: Any) -> Path:
    """Runs the named benchmarks and writes the results folder; returns the report path. Upstream outputs come from
    exactly one of ``upstream_file``, an endpoint (``upstream_base_url`` + ``upstream_model``, or ``upstream_engine``)
    or ``upstream_scripted``; ``recovery`` and ``tier1`` need none. ``recovery_trust_spec`` (e.g. ``(False, True)``)
    runs recovery once per spec policy on the same inputs."""
    benches = list(dict.fromkeys(benches))
    check_upstream(benches, upstream_file, upstream_base_url or upstream_engine, upstream_scripted)
    sources = [b for b in benches if b not in NO_UPSTREAM]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results: list[BenchResult] = []
    for name in sources:
        bench = make_benchmark(name, seed=seed, **bench_options)
        items = bench.load(limit)
        if upstream_file is not None:
            outputs = read_outputs_file(upstream_file, items)
        elif upstream_scripted is not None:
            outputs = scripted_outputs(bench, items, upstream_scripted, seed=seed)
        else:
            outputs = endpoint_outputs(items, upstream_base_url or "", upstream_model or "",
                                          cache_file or out / "upstream_cache.jsonl", engine=upstream_engine,
                                          **dict(upstream_settings or {}))
        results.append(evaluate(bench, items, outputs, refiner, progress=progress))
    recovery = None
    if RECOVERY in benches:
        if refiner is None:
            raise ValueError("the recovery benchmark needs a refiner (tier1 or a model)")
        items = [it for name in recovery_sources for it in make_benchmark(name, seed=seed, **bench_options).load(limit)]
        recovery = {}
        own = bool(getattr(refiner, "trust_spec", False))
        for trust in dict.fromkeys(recovery_trust_spec or [own]):
            ref = refiner
            if trust != own:
                ref = copy.copy(refiner)
                ref.trust_spec = trust
            recovery[spec_policy(trust)] = run_recovery(items, ref, seed=seed, clean_ratio=clean_ratio,
                                                        progress=progress)
    tier1 = None
    if TIER1 in benches:
        cases = load_cases(bench_options.get("bfcl_wheel"), tuple(bench_options.get("bfcl_categories") or CATEGORIES),
                           limit, seed=seed)
        tier1 = run_suite(cases, seed=seed, progress=progress)
    return write_results(results, out, meta=meta, recovery=recovery, chart=chart, tier1=tier1)
