"""What every benchmark shares: the sample record, the benchmark interface, data-folder lookup and small helpers.

A benchmark turns public data into :class:`Sample` records (the upstream prompt, the refiner's view of the task, the
gold answer), scores one output text against a sample (``score``: a dict of 0/1 or fractional metrics) and averages
those per subset (``summarize``). The runner does the rest (upstream outputs, refinement, report).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from refiner.calls import ToolCall

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def default_data_dir() -> Path:
    """``$TOOL_REFINER_SHARED_DATA`` if set, else ``../shared/data`` next to the project root."""
    env = os.environ.get("TOOL_REFINER_SHARED_DATA")
    return Path(env) if env else PROJECT_ROOT.parent / "shared" / "data"


def require_file(path: Path, what: str) -> Path:
    """``path`` when it exists, else a clear error naming it."""
    if not path.exists():
        raise FileNotFoundError(f"{what}: {path} does not exist (set --data-dir or TOOL_REFINER_SHARED_DATA)")
    return path


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: line {i}: invalid JSON: {e.msg}") from None
    return rows


@dataclass
class Sample:
    """One benchmark item.

    ``messages`` is the upstream model's prompt; ``system``/``query`` are what the refiner is shown as the task (the
    task's own system prompt with its tools, and the user's request); ``fmt`` is the wire format the answer must use;
    ``gold`` is benchmark-specific (calls, possible answers, ...); ``gold_calls`` is one correct call list (used to
    script upstream outputs and by the corruption-recovery benchmark).
    """

    id: str
    bench: str
    subset: str
    messages: list[dict]
    system: str
    query: str | list[dict]
    tools: Any
    fmt: str
    gold: Any
    gold_calls: list[ToolCall]
    meta: dict = field(default_factory=dict)

    def refine_request(self, upstream: str) -> dict:
        """The pipeline request for this sample and an upstream output."""
        req = {"tools": self.tools, "system": self.system, "query": self.query, "upstream": upstream,
               "format": self.fmt}
        if self.meta.get("format_hint"):
            req["format_hint"] = self.meta["format_hint"]
        return req


class Benchmark:
    """Interface of a benchmark. Subclasses set ``name``, ``metrics`` (ordered metric names; the first is the headline)
    and implement ``load`` and ``score``."""

    name: ClassVar[str]
    title: ClassVar[str] = ""
    metrics: ClassVar[tuple[str, ...]]
    # Metrics reported on a 0-100 scale (the paper's Tables 1 and 4) rather than 0-1 (Table 2).
    percent: ClassVar[bool] = True

    def load(self, limit: int | None = None) -> list[Sample]:  # pragma: no cover - interface
        raise NotImplementedError

    def score(self, sample: Sample, text: str) -> dict[str, float]:  # pragma: no cover - interface
        raise NotImplementedError

    def render(self, sample: Sample, calls: Sequence[ToolCall]) -> str:
        """``calls`` as a correct answer text for ``sample`` (used to script upstream outputs)."""
        from refiner import formats

        return formats.get(sample.fmt).render(calls)

    def postprocess_refined(self, sample: Sample, refined: str) -> str:
        """Hook for benchmark-specific adjustments of the refiner's answer (identity by default)."""
        return refined

    def summarize(self, samples: Sequence[Sample], scores: Sequence[Mapping[str, float]]) -> dict[str, dict]:
        """Mean of every metric, overall and per subset: ``{"overall": {...,"n"}, subset: {...}}``."""
        groups: dict[str, list[Mapping[str, float]]] = {"overall": list(scores)}
        for s, sc in zip(samples, scores):
            groups.setdefault(s.subset, []).append(sc)
        return {g: mean_metrics(rows, self.metrics) for g, rows in groups.items()}


def mean_metrics(rows: Iterable[Mapping[str, float]], metrics: Sequence[str]) -> dict[str, float]:
    rows = list(rows)
    out: dict[str, float] = {"n": len(rows)}
    for m in metrics:
        vals = [float(r[m]) for r in rows if r.get(m) is not None]
        out[m] = sum(vals) / len(vals) if vals else float("nan")
        if len(vals) != len(rows):
            out[f"{m}_n"] = len(vals)
    return out


def take(items: Sequence[Any], limit: int | None) -> list[Any]:
    return list(items) if limit is None or limit < 0 else list(items)[:limit]


def spread(items: Sequence[Any], limit: int | None) -> list[Any]:
    """Up to ``limit`` items spread evenly over the sequence (so a small slice still covers every part)."""
    items = list(items)
    if limit is None or limit < 0 or limit >= len(items):
        return items
    if limit == 0:
        return []
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]
