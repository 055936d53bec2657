"""Builds the refiner's training set: (task, upstream output, correct calls) triplets written as verl parquet.

The four data types of the paper (Section 3.2): ``erroneous`` (corrupted calls, per error type x corrupting model x
source), ``correct`` (the gold calls as upstream), ``shuffled_full`` (NesTools calls in a wrong order) and
``shuffled_simplified`` (NesTools tool names per step, wrongly grouped or ordered). Each row's prompt comes from
:func:`refiner.prompt.build_messages`; its ground truth is checked with :func:`rewards.compute_score`: the answer
scores 1.0, a correct upstream 1.0, a corrupted upstream less, under the configured ``reward_variant``.

Row schema (verl): ``data_source``, ``prompt`` (chat list), ``ability``, ``reward_model = {"style": "rule",
"ground_truth": '{"format", "answer", "order_sensitive"}'}``, ``extra_info`` (index, split, source, record_id,
data_type, label, error_group, error_classes, corruptor, model, format, upstream, reward_variant).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from data_gen import sources
from data_gen.config import type_counts
from data_gen.corrupt.llm import llm_upstreams
from data_gen.corrupt.rules import ERROR_CLASSES, ERROR_GROUPS, GROUP_OF, CorruptionError, corrupt
from data_gen.sources import Sample, SkipLog, SourceUnavailable
from data_gen.sources.nestools import to_order
from refiner import formats
from refiner.prompt import build_messages, format_hint
from rewards import compute_score, make_ground_truth, parse_ground_truth

log = logging.getLogger(__name__)

ORDER_CLASSES = {
    "shuffled_full": ["shuffled_order", "swapped_calls"],
    "shuffled_simplified": ["shuffled_order", "swapped_calls", "split_step", "merge_steps"],
}


@dataclass
class RowPlan:
    """One row to make: a data type, a sample, and for corrupted types the error group and corrupting model."""

    dtype: str
    sample: Sample
    group: str | None = None
    model: str | None = None
    seed: int = 0


@dataclass
class BuildReport:
    out_dir: Path
    rows: dict[str, int] = field(default_factory=dict)
    counts: Counter = field(default_factory=Counter)  # rows per (dtype, source)
    rejected: Counter = field(default_factory=Counter)  # discarded attempts per reason
    skips: SkipLog = field(default_factory=SkipLog)
    unavailable: dict[str, str] = field(default_factory=dict)
    substitutions: list[str] = field(default_factory=list)
    reused_samples: Counter = field(default_factory=Counter)
    llm: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def sources_text(self) -> str:
        """Per source: where it was read from, records read, kept and skipped per reason (deliberate filters with
        why), as the build logs it."""
        return "\n".join(self.skips.describe(name) for name in self.skips.by_source())

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "per_type_source": {f"{t}/{s}": n for (t, s), n in sorted(self.counts.items())},
            "rejected": dict(self.rejected),
            "sources": self.skips.by_source(),
            "skipped_records": self.skips.summary(),
            "unavailable_sources": self.unavailable,
            "substitutions": self.substitutions,
            "reused_samples": dict(self.reused_samples),
            "llm": self.llm,
            "seconds": round(self.seconds, 2),
        }


class _Cycle:
    """Draws samples without replacement, reshuffling when the pool is used up (reuse is counted)."""

    def __init__(self, items: list[Sample], rng: random.Random) -> None:
        self.items, self.rng, self.pos, self.order, self.reused = items, rng, 0, [], 0
        self._refill()

    def _refill(self) -> None:
        self.order = list(range(len(self.items)))
        self.rng.shuffle(self.order)
        self.pos = 0

    def next(self) -> Sample:
        if self.pos >= len(self.order):
            self._refill()
            self.reused += 1
        s = self.items[self.order[self.pos]]
        self.pos += 1
        return s


def load_pools(
    cfg: dict[str, Any], source_paths: dict[str, str], report: BuildReport, progress: bool = True
) -> dict[str, list[Sample]]:
    """Samples per needed source (``nestools_order`` is derived from ``nestools``). Every source is checked before
    any is read (:func:`data_gen.sources.check`: a missing file, no Hub copy, a gated, missing or unreachable Hub
    dataset), so a build that cannot be made stops before any work; with ``missing_sources: substitute | skip``
    unavailable sources are recorded in the report and left out. What each source read, kept and skipped (per
    reason) is logged and kept in ``report.skips``."""
    needed = sorted({s for t in cfg["types"].values() for s in t["sources"]})
    paths: dict[str, str | None] = {}
    for name in needed:
        scfg = cfg["sources"].get(name) or {}
        paths[name] = source_paths.get(name) or scfg.get("path")
        if scfg.get("format"):
            sources.ensure_format(scfg["format"])
        try:
            sources.check(name, paths[name])
        except SourceUnavailable as e:
            report.unavailable[name] = str(e)
    if report.unavailable and cfg["missing_sources"] == "error":
        _raise_unavailable(report)
    pools: dict[str, list[Sample]] = {}
    for name in needed:
        if name in report.unavailable:
            continue
        scfg = cfg["sources"].get(name) or {}
        try:
            pools[name] = sources.load(name, paths[name], limit=scfg.get("limit"), skips=report.skips,
                                       progress=progress, fmt=scfg.get("format"))
        except (SourceUnavailable, FileNotFoundError) as e:
            report.unavailable[name] = str(e)
            continue
        log.info("%s", report.skips.describe(name))
        if not pools[name]:
            report.unavailable[name] = f"source {name!r}: no usable records ({report.skips.total(name)} skipped)"
            del pools[name]
    if report.unavailable and cfg["missing_sources"] == "error":
        _raise_unavailable(report)
    return pools


def _raise_unavailable(report: BuildReport) -> None:
    lines = "\n  ".join(report.unavailable.values())
    raise SourceUnavailable(
        f"{len(report.unavailable)} source(s) unavailable:\n  {lines}\n"
        "Give local copies with --source-path NAME=PATH, set missing_sources: substitute (other sources of the "
        "same type stand in) or skip, or use configs/data/local.yaml (NesTools + the Glaive subset only)."
    )


def plan(cfg: dict[str, Any], pools: dict[str, list[Sample]], rng: random.Random, report: BuildReport) -> list[RowPlan]:
    """Every row to make, by the configured mix."""
    cycles = {name: _Cycle(p, random.Random(rng.random())) for name, p in pools.items()}
    jobs: list[RowPlan] = []

    def quota(dtype: str, per: int, wanted: list[str]) -> list[tuple[str, int]]:
        avail = [s for s in wanted if s in pools]
        missing = [s for s in wanted if s not in pools]
        if not avail:
            report.substitutions.append(f"{dtype}: no source available of {wanted}; type left out")
            return []
        out = {s: per for s in avail}
        if missing and cfg["missing_sources"] == "substitute":
            for k, s in enumerate(missing):
                for j in range(per):
                    out[avail[(k + j) % len(avail)]] += 1
                report.substitutions.append(f"{dtype}: {per} rows of {s} made from {', '.join(avail)}")
        return list(out.items())

    for dtype, t in cfg["types"].items():
        if dtype == "erroneous":
            for group in t["error_types"]:
                if group not in ERROR_GROUPS and group not in ERROR_CLASSES:
                    raise ValueError(f"unknown error type {group!r}; known: {sorted(ERROR_GROUPS)} or a class")
                for model in t["models"]:
                    for src, n in quota(dtype, int(t["per_source"]), t["sources"]):
                        jobs += [RowPlan(dtype, cycles[src].next(), group, model, rng.randrange(2**31)) for _ in range(n)]
        else:
            if "count" in t:
                per = -(-int(t["count"]) // len(t["sources"]))
            else:
                per = int(t["per_source"])
            made = []
            for src, n in quota(dtype, per, t["sources"]):
                made += [RowPlan(dtype, cycles[src].next(), None, None, rng.randrange(2**31)) for _ in range(n)]
            if "count" in t:
                made = made[: int(t["count"])]
            jobs += made
    for name, c in cycles.items():
        if c.reused:
            report.reused_samples[name] = c.reused
    return jobs


def _job_sample(job: RowPlan) -> Sample:
    return to_order(job.sample) if job.dtype == "shuffled_simplified" else job.sample


def _rules_upstream(job: RowPlan, sample: Sample) -> tuple[str, tuple[str, ...], int]:
    classes = ERROR_GROUPS.get(job.group, [job.group]) if job.dtype == "erroneous" else ORDER_CLASSES[job.dtype]
    c = corrupt(sample.calls, sample.fmt, sample.tools, random.Random(job.seed), classes, query=sample.query)
    return c.text, c.error_classes, c.rejected


def make_row(
    cfg: dict[str, Any], job: RowPlan, sample: Sample, upstream: str, label: str, error_classes: tuple[str, ...],
    corruptor: str,
) -> dict[str, Any]:
    return {
        "data_source": cfg["data_source"],
        "prompt": build_messages(sample.system, sample.query, upstream, format_hint=format_hint(sample.fmt)),
        "ability": cfg["ability"],
        "reward_model": {"style": "rule", "ground_truth": make_ground_truth(sample.fmt, sample.calls)},
        "extra_info": {
            "index": -1,
            "split": "",
            "source": sample.source,
            "record_id": sample.record_id,
            "data_type": job.dtype,
            "label": label,
            "error_group": GROUP_OF.get(job.group or "", job.group)
            or ("sequence" if job.dtype.startswith("shuffled") else ""),
            "error_classes": list(error_classes),
            "corruptor": corruptor,
            "model": job.model or "",
            "format": sample.fmt,
            "upstream": upstream,
            "reward_variant": cfg["reward_variant"],
        },
    }


def check_row(row: dict[str, Any], variant: str = "paper") -> str | None:
    """Why the row is inconsistent with the reward (``variant``: ``paper`` | ``strict``), or ``None``: the answer
    must score 1.0, a correct upstream 1.0 and a corrupted upstream less."""
    gt = row["reward_model"]["ground_truth"]
    ds = row["data_source"]
    if compute_score(ds, parse_ground_truth(gt).answer, gt, variant=variant)["score"] != 1.0:
        return "gold answer does not score 1.0"
    up = compute_score(ds, row["extra_info"]["upstream"], gt, variant=variant)["score"]
    if row["extra_info"]["label"] == "correct" and up != 1.0:
        return "correct upstream does not score 1.0"
    if row["extra_info"]["label"] == "corrupted" and up >= 1.0:
        return "corrupted upstream scores 1.0"
    return None


def split_rows(rows: list[dict[str, Any]], fraction: float, rng: random.Random, *, test: float = 0.0,
               by_record: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Train/validation (and, with ``test > 0``, test) split; indices are per split. By default rows are stratified
    by data type; with ``by_record`` every row made from one source record lands in the same split (records are
    shuffled and dealt by row count), so no test prompt shares a task with a training prompt."""
    out: dict[str, list[dict]] = {"train": [], "validation": []}
    if test > 0:
        out["test"] = []
    if by_record:
        by_rec: dict[tuple[str, str], list[dict]] = {}
        for r in rows:
            by_rec.setdefault((r["extra_info"]["source"], str(r["extra_info"]["record_id"])), []).append(r)
        groups = [by_rec[k] for k in sorted(by_rec)]
        rng.shuffle(groups)
        want = {"validation": round(len(rows) * fraction), "test": round(len(rows) * test)}
        for g in groups:
            name = next((n for n in ("test", "validation") if n in out and len(out[n]) < want[n]), "train")
            out[name] += g
    else:
        by_type: dict[str, list[dict]] = {}
        for r in rows:
            by_type.setdefault(r["extra_info"]["data_type"], []).append(r)
        for group in by_type.values():
            rng.shuffle(group)
            n_val, n_test = round(len(group) * fraction), round(len(group) * test)
            out["validation"] += group[:n_val]
            if test > 0:
                out["test"] += group[n_val : n_val + n_test]
            out["train"] += group[n_val + n_test :]
    for name, part in out.items():
        rng.shuffle(part)
        for i, r in enumerate(part):
            r["extra_info"]["index"] = i
            r["extra_info"]["split"] = name
    return out


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import datasets

    datasets.Dataset.from_list(rows).to_parquet(str(path))


def build(
    cfg: dict[str, Any],
    out_dir: str | Path,
    *,
    source_paths: dict[str, str] | None = None,
    engine_factory: Callable[[str], Any] | None = None,
    progress: bool = True,
) -> BuildReport:
    """Builds the configured mix into ``out_dir/{train,validation}.parquet`` (and ``test.parquet`` when the split
    asks for a test share) plus ``manifest.json``."""
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = BuildReport(out)
    rng = random.Random(cfg["seed"])
    pools = load_pools(cfg, source_paths or {}, report, progress)
    jobs = plan(cfg, pools, rng, report)
    if cfg["corruptor"] == "llm":
        llm_out = llm_upstreams(cfg, jobs, [_job_sample(j) for j in jobs], engine_factory, report, progress)
    rows: list[dict[str, Any]] = []
    for k, job in enumerate(tqdm(jobs, desc="build rows", unit="row", disable=not progress)):
        sample = _job_sample(job)
        for attempt in range(5):
            if job.dtype == "correct":
                upstream = formats.get(sample.fmt).render(sample.calls)
                label, classes, corruptor = "correct", (), "none"
            elif cfg["corruptor"] == "llm":
                upstream, label, classes = llm_out[k]
                corruptor = "llm"
                if upstream is None:
                    break
            else:
                try:
                    upstream, classes, rejected = _rules_upstream(job, sample)
                except CorruptionError:
                    report.rejected["no applicable corruption; another sample drawn"] += 1
                    job = RowPlan(job.dtype, pools[job.sample.source][rng.randrange(len(pools[job.sample.source]))],
                              job.group, job.model, rng.randrange(2**31))
                    sample = _job_sample(job)
                    continue
                report.rejected["rule corruption changed nothing (regenerated)"] += rejected
                label, corruptor = "corrupted", "rules"
            row = make_row(cfg, job, sample, upstream, label, classes, corruptor)
            why = check_row(row, cfg["reward_variant"])
            if why is None:
                rows.append(row)
                report.counts[(job.dtype, sample.source)] += 1
                break
            report.rejected[why] += 1
            if job.dtype == "correct" or corruptor == "llm":
                break
            job = RowPlan(job.dtype, job.sample, job.group, job.model, rng.randrange(2**31))
    parts = split_rows(rows, float(cfg["split"]["validation"]), rng, test=float(cfg["split"].get("test", 0.0)),
                       by_record=cfg["split"].get("by") == "record")
    for name, part in parts.items():
        if part:
            write_parquet(part, out / f"{name}.parquet")
        report.rows[name] = len(part)
    report.seconds = time.perf_counter() - t0
    manifest = {"config": cfg, "expected_rows": type_counts(cfg), **report.to_json()}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n")
    return report
