"""The seeds' comparison of the slice check (``tests/support/slice_check.py --report``), rebuilt from per-prompt
results alone: the table's means and ranges, the paired sign test, the curves."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))
from slice_check import collect, report, seed_curves, sign_test  # noqa: E402


def test_sign_test_matches_the_binomial_distribution():
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 5) == 1.0
    assert sign_test(8, 0) == pytest.approx(2 / 2**8)
    assert sign_test(1, 9) == pytest.approx(2 * (1 + 10) / 2**10)
    assert sign_test(3, 2) == sign_test(2, 3)
    # against every equally likely split of the differing prompts: the share at least as far from even
    for wins, losses in [(12, 4), (9, 2), (7, 7), (0, 3), (10, 5)]:
        m = wins + losses
        far = [bin(k).count("1") for k in range(2**m)]
        extreme = sum(abs(w - m / 2) >= abs(wins - m / 2) for w in far)
        assert sign_test(wins, losses) == pytest.approx(extreme / 2**m)


def write_results(src: Path, hits: dict[tuple[int, str], list[int]], classes: list[str]) -> None:
    lines = [json.dumps({"seed": seed, "config": config, "index": i, "class": classes[i], "exact": hit})
             for (seed, config), row in hits.items() for i, hit in enumerate(row)]
    (src / "prompts.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_report_gives_mean_range_and_pooled_pairs(tmp_path):
    classes = ["a", "a", "b", "b"]
    hits = {
        (0, "warm/greedy"): [1, 0, 0, 0], (0, "dapo/greedy"): [1, 1, 0, 0],
        (1, "warm/greedy"): [0, 0, 1, 0], (1, "dapo/greedy"): [1, 1, 1, 1],
        (2, "warm/greedy"): [1, 1, 0, 0], (2, "dapo/greedy"): [1, 0, 0, 1],
    }
    write_results(tmp_path, hits, classes)
    for seed in range(3):  # curves: verl's file logger lines
        (tmp_path / f"metrics-seed-{seed}.jsonl").write_text("\n".join(json.dumps(
            {"step": s, "data": {"critic/score/mean": 0.1 * s + seed, "val-core/tool/reward/mean@1": 0.5}})
            for s in range(1, 4)) + "\n", encoding="utf-8")
    result = report(tmp_path)
    # seed by seed, DAPO against warm: seed 0 +1 win; seed 1 +3 wins; seed 2 one win, one loss
    assert result["tests"]["dapo/greedy vs warm/greedy"] == {
        "pairs": 12, "wins": 5, "losses": 1, "p": pytest.approx(sign_test(5, 1)), "points": pytest.approx(100 * 4 / 12)}
    assert result["rates"]["warm/greedy|all|2"] == (2, 4)
    table = (tmp_path / "seeds.md").read_text(encoding="utf-8")
    # overall: warm 25, 25, 50 % -> mean 33, range 25-50; DAPO 50, 100, 50 -> 67 (50-100)
    assert "| all (4) | 33 (25-50) | 67 (50-100) |" in table
    assert "| b (2) | 17 (0-50) | 50 (0-100) |" in table  # warm 0, 50, 0; DAPO 0, 100, 50
    assert (tmp_path / "seeds.png").stat().st_size > 0


def test_collect_gathers_finished_seeds_only(tmp_path):
    rng = random.Random(3)
    for seed in range(2):
        run = tmp_path / f"seed-{seed}"
        (run / "ckpt").mkdir(parents=True)
        (run / "ckpt" / "metrics.jsonl").write_text('{"step": 1, "data": {"critic/score/mean": 0.2}}\n')
        table = {name: {"prompts": [{"index": i, "class": "c", "exact": rng.randint(0, 1)} for i in range(5)]}
                 for name in ("tier1", "warm/greedy", "dapo/greedy")}
        (run / "judge-test.json").write_text(json.dumps(table))
    (tmp_path / "seed-2").mkdir()  # started, not judged yet
    collect(tmp_path)
    recs = [json.loads(line) for line in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert len(recs) == 2 * 3 * 5 and {r["seed"] for r in recs} == {0, 1}
    assert sorted(p.name for p in tmp_path.glob("metrics-seed-*.jsonl")) == ["metrics-seed-0.jsonl",
                                                                              "metrics-seed-1.jsonl"]
    result = report(tmp_path)
    assert math.isclose(sum(result["rates"][f"tier1|all|{k}"][1] for k in (0, 1)), 10)


def test_collect_keeps_the_lines_of_seeds_run_elsewhere(tmp_path):
    elsewhere = [{"seed": 0, "config": "tier1", "index": i, "class": "c", "exact": i % 2} for i in range(4)]
    stale = {"seed": 1, "config": "tier1", "index": 0, "class": "c", "exact": 0}  # seed 1 is judged here again
    (tmp_path / "prompts.jsonl").write_text("\n".join(json.dumps(r) for r in [*elsewhere, stale]) + "\n")
    run = tmp_path / "seed-1"
    run.mkdir()
    (run / "judge-test.json").write_text(json.dumps(
        {"tier1": {"prompts": [{"index": i, "class": "c", "exact": 1} for i in range(4)]}}))
    collect(tmp_path)
    recs = [json.loads(line) for line in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert [r for r in recs if r["seed"] == 0] == elsewhere
    assert [r["exact"] for r in recs if r["seed"] == 1] == [1, 1, 1, 1]


def test_bf16_slowdown_is_a_ratio_of_two_timings():
    pytest.importorskip("torch")
    from cpu_rehearsal import bf16_slowdown

    slower = bf16_slowdown()
    assert math.isfinite(slower) and slower > 0


SEEDS_DOCS = Path(__file__).resolve().parents[1] / "docs" / "slice-seeds"


@pytest.mark.parametrize("log", sorted(SEEDS_DOCS.glob("metrics-seed-*.jsonl")), ids=lambda p: p.stem)
def test_every_seed_has_both_curves(log):
    """The kept training logs give the plot a training line and a validation line (verl logs the exact-answer rate
    under val-core/)."""
    train, val = seed_curves(log)
    assert len(train) >= 10 and all(-2 <= r <= 2 for _, r in train)
    assert len(val) >= 2 and all(0 <= a <= 1 for _, a in val)
    assert [s for s, _ in val] == sorted(s for s, _ in val)


def test_kept_seeds_table_is_what_the_report_builds(tmp_path):
    """docs/slice-seeds/seeds.md, the table docs/training.md cites, is the report of the kept per-prompt results."""
    pytest.importorskip("matplotlib")
    for name in ("prompts.jsonl", *(p.name for p in SEEDS_DOCS.glob("metrics-seed-*.jsonl"))):
        (tmp_path / name).write_bytes((SEEDS_DOCS / name).read_bytes())
    report(tmp_path)
    assert (tmp_path / "seeds.md").read_text(encoding="utf-8") == (SEEDS_DOCS / "seeds.md").read_text(encoding="utf-8")
