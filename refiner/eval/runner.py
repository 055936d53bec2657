"""Running a benchmark: score the upstream outputs, refine them, score again, and write the results folder.

Results folder layout (``write_results``)::

    OUT/<bench>/outputs.jsonl   one line per sample: id, subset, upstream (raw) text, refined text, pipeline stage,
                                changed, raw and refined scores
    OUT/summary.json            every benchmark's summaries (overall and per subset), raw and refined
    OUT/report.md, OUT/chart.png  (refiner.eval.report)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from refiner.eval.common import Benchmark, Sample

BATCH = 64


@dataclass
class BenchResult:
    """One benchmark's samples, per-sample rows and summaries (``refined`` is None when no refiner ran)."""

    bench: Benchmark
    samples: list[Sample]
    rows: list[dict]
    raw: dict[str, dict]
    refined: dict[str, dict] | None
    extra: dict[str, Any] = field(default_factory=dict)


def refine_outputs(refiner: Any, samples: Sequence[Sample], outputs: Mapping[str, str], bench: Benchmark,
                   progress: bool = True) -> list[dict]:
    """The pipeline's result for every sample (in order), with ``refined`` after the benchmark's post-processing.
    A request the pipeline cannot read becomes an error result (its upstream text passed through), never dropped."""
    results: list[dict] = []
    bar = tqdm(total=len(samples), desc=f"refine {bench.name}", disable=not progress, leave=False)
    for start in range(0, len(samples), BATCH):
        chunk = samples[start : start + BATCH]
        reqs = [s.refine_request(outputs[s.id]) for s in chunk]
        for s, res in zip(chunk, refiner.refine_batch(reqs, errors="result")):
            res = dict(res)
            res["refined"] = bench.postprocess_refined(s, res.get("refined", ""))
            results.append(res)
        bar.update(len(chunk))
    bar.close()
    return results


def evaluate(bench: Benchmark, samples: Sequence[Sample], outputs: Mapping[str, str], refiner: Any = None,
             progress: bool = True) -> BenchResult:
    """Raw scores of ``outputs`` and, when a refiner is given, refined scores."""
    samples = list(samples)
    missing = [s.id for s in samples if s.id not in outputs]
    if missing:
        raise ValueError(f"{bench.name}: no upstream output for {len(missing)} sample(s), e.g. {missing[:5]}")
    refined = refine_outputs(refiner, samples, outputs, bench, progress) if refiner is not None else None
    rows, raw_scores, ref_scores = [], [], []
    for i, s in enumerate(tqdm(samples, desc=f"score {bench.name}", disable=not progress, leave=False)):
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
    return BenchResult(
        bench=bench,
        samples=samples,
        rows=rows,
        raw=bench.summarize(samples, raw_scores),
        refined=bench.summarize(samples, ref_scores) if refined is not None else None,
    )


def write_results(results: Sequence[BenchResult], out_dir: str | Path, meta: Mapping[str, Any] | None = None,
                  recovery: Any = None, chart: bool = True) -> Path:
    """Writes per-sample outputs, ``summary.json``, ``report.md`` and (if matplotlib is there) ``chart.png``;
    returns the report path."""
    from refiner.eval import report

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"meta": dict(meta or {}), "benchmarks": {}}
    for r in results:
        d = out / r.bench.name
        d.mkdir(exist_ok=True)
        with (d / "outputs.jsonl").open("w", encoding="utf-8") as f:
            for row in r.rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        summary["benchmarks"][r.bench.name] = {"raw": r.raw, "refined": r.refined, **r.extra}
    if recovery is not None:
        d = out / "recovery"
        d.mkdir(exist_ok=True)
        with (d / "outputs.jsonl").open("w", encoding="utf-8") as f:
            for row in recovery.rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        summary["recovery"] = recovery.table
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n",
                                      encoding="utf-8")
    text = report.render_report(results, recovery=recovery, meta=meta)
    path = out / "report.md"
    path.write_text(text, encoding="utf-8")
    if chart:
        report.bar_chart(results, out / "chart.png")
    return path
