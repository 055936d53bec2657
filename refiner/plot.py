"""Training curves from a verl run log (paper Figure 2: reward and mean response length per step), read from the
``file`` logger's JSONL or the console's ``step:N - metric:value`` lines."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path

# Total per-sequence reward (compute_score + overlong penalty) and mean response length, in verl 0.9.1's names.
REWARD_KEYS = ("critic/score/mean", "critic/rewards/mean")
LENGTH_KEY = "response_length/mean"
CARD_METRICS = ("critic/score/mean", "response_length/mean", "response_length/clip_ratio",
                "training/filter_groups/evicted_samples", "actor/pg_clipfrac", "actor/entropy")

_CONSOLE = re.compile(r"(?:^|\s)step:(\d+)\s+-\s+(.*)$")
_NUM = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(inf|nan)$")

Series = dict[str, list[tuple[int, float]]]


class PlotError(ValueError):
    """A log with nothing to plot; the message names the file and what was looked for."""


def _add(series: Series, step: int, key: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if math.isfinite(float(value)):
        series[key].append((step, float(value)))


def read_metrics(path: str | Path) -> Series:
    """Every numeric metric in the log, as ``{name: [(step, value), ...]}`` in step order."""
    p = Path(path)
    if not p.is_file():
        raise PlotError(f"run log not found: {p}")
    series: Series = defaultdict(list)
    with p.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and isinstance(rec.get("step"), int) and isinstance(rec.get("data"), dict):
                    for k, v in rec["data"].items():
                        _add(series, rec["step"], k, v)
                continue
            m = _CONSOLE.search(line)
            if not m:
                continue
            step = int(m.group(1))
            for part in m.group(2).split(" - "):
                key, sep, value = part.rpartition(":")
                if sep and _NUM.match(value.strip()):
                    _add(series, step, key.strip(), float(value))
    return {k: sorted(v) for k, v in series.items()}


def plot_run(log: str | Path, out: str | Path, *, title: str | None = None) -> dict[str, int]:
    """Draws reward and mean response length against step into ``out`` (PNG/PDF/SVG by suffix).
    Returns how many points each panel has."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = read_metrics(log)
    reward_key = next((k for k in REWARD_KEYS if series.get(k)), None)
    if reward_key is None and not series.get(LENGTH_KEY):
        raise PlotError(f"{log}: no {' / '.join(REWARD_KEYS)} or {LENGTH_KEY} values found (expected verl console "
                        "lines 'step:N - key:value ...' or file-logger JSONL)")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    counts = {}
    for ax, key, label, tag in ((axes[0], reward_key, "reward (mean per response)", "(a)"),
                                (axes[1], LENGTH_KEY, "response length (tokens, mean)", "(b)")):
        points = series.get(key or "", [])
        counts[label] = len(points)
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o" if len(points) < 30 else None, linewidth=1.5)
        else:
            ax.text(0.5, 0.5, "not in log", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("training step")
        ax.set_ylabel(label)
        ax.set_title(f"{tag} {key or label}")
        ax.grid(alpha=0.3)
    fig.suptitle(title or f"Training dynamics: {Path(log).name}")
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return counts
