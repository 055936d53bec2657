"""Corruption recovery: each sample's gold calls, corrupted by the rule corruptor (one seeded error, classes dealt
round-robin; a share left clean), refined, and counted per class: ``fixed``, ``still_wrong``, and for clean inputs
``kept`` or ``harmed``. Correct means the refined text parses strictly to the gold."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from data_gen.corrupt.rules import changes_something, expand_classes
from refiner import formats
from refiner.eval.common import BenchItem, corrupt_one, refine_all


@dataclass
class RecoveryResult:
    rows: list[dict]
    table: dict[str, dict[str, int]]
    skipped: dict[str, int] = field(default_factory=dict)  # class -> samples it could not corrupt


def spec_policy(trust_spec: bool) -> str:
    """The label of a tier-1 spec policy in reports: ``"on"`` (every tool spec treated as exact) or ``"off"``."""
    return "on" if trust_spec else "off"


def make_upstreams(items: Sequence[BenchItem], seed: int = 0, clean_ratio: float = 0.15,
                   classes: Sequence[str] | None = None) -> tuple[list[dict], dict[str, int]]:
    """One upstream per item: ``{"item", "text", "error_class"}`` (``"clean"`` when left as the gold)."""
    pool = expand_classes(classes)
    rng = random.Random(seed)
    out, skipped = [], Counter()
    turn = 0
    for s in items:
        if not s.gold_calls:
            continue
        if rng.random() < clean_ratio:
            out.append({"item": s, "text": formats.get(s.fmt).render(s.gold_calls), "error_class": "clean"})
            continue
        for k in range(len(pool)):
            cls = pool[(turn + k) % len(pool)]
            c, why = corrupt_one(s.gold_calls, s.fmt, s.tools, random.Random(f"{seed}-{s.id}-{cls}"), cls)
            if c is None:
                skipped[why] += 1
                continue
            out.append({"item": s, "text": c.text, "error_class": c.error_classes[0]})
            turn = (turn + k + 1) % len(pool)
            break
    return out, skipped


def run_recovery(items: Sequence[BenchItem], refiner: Any, seed: int = 0, clean_ratio: float = 0.15,
                 classes: Sequence[str] | None = None, progress: bool = True) -> RecoveryResult:
    upstreams, skipped = make_upstreams(items, seed, clean_ratio, classes)
    results = refine_all(refiner, [it["item"].refine_request(it["text"]) for it in upstreams], "recovery", progress)
    rows: list[dict] = []
    table: dict[str, dict[str, int]] = {}
    for it, res in zip(upstreams, results):
        s: BenchItem = it["item"]
        correct = not changes_something(res.get("refined", ""), s.gold_calls, s.fmt)
        cls = it["error_class"]
        t = table.setdefault(cls, {"n": 0, "fixed": 0, "still_wrong": 0, "harmed": 0, "kept": 0})
        t["n"] += 1
        t[("kept" if correct else "harmed") if cls == "clean" else ("fixed" if correct else "still_wrong")] += 1
        rows.append({"id": s.id, "source": s.bench, "error_class": cls, "upstream": it["text"],
                     "refined": res.get("refined"), "stage": res.get("stage"), "correct": correct})
    table = {c: table[c] for c in sorted(table, key=lambda c: (c == "clean", c))}
    table["all"] = {k: sum(t[k] for t in table.values()) for k in ("n", "fixed", "still_wrong", "harmed", "kept")}
    return RecoveryResult(rows=rows, table=table, skipped=skipped)
