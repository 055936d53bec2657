"""Raw outputs of real model families, read with the format left to auto-detection: agreement per family and kind,
and the time per parse.

The corpus is ``tests/corpus/dialects/*.jsonl`` (see ``tests/dialect_corpus.py``): outputs written the way each model
family's chat template and published tool parser define them. A row *agrees* when ``Refiner().refine`` (tier 1, no
model, format auto-detected) returns the calls the model meant (and reports a broken text). Times are per text, on
one core, best of ``--repeat`` passes: ``detect`` (detect_format), ``strict`` (parse_strict in the row's format, valid
rows), ``lenient`` (parse_lenient) and ``refine`` (the whole tier-1 pipeline). Peer: ``json.loads`` of the same
calls as a JSON list, in the same run.

Target: every family read as meant in >= 95 % of its valid/multi/odd rows; no broken row misread.

    python benchmarks/bench_dialects.py [--repeat 5] [--family qwen3_coder]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from dialect_corpus import READ_AS_MEANT, Row, judge, load  # noqa: E402

from refiner import formats  # noqa: E402
from refiner.pipeline import Refiner  # noqa: E402

TARGET = 0.95


def best_time(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def timings(row: Row, refiner: Refiner, repeat: int) -> dict[str, float]:
    fmt = formats.get(row.format)
    out = {
        "detect": best_time(lambda: formats.detect_format(row.text), repeat),
        "lenient": best_time(lambda: fmt.parse_lenient(row.text), repeat),
        "refine": best_time(lambda: refiner.refine(row.request()), repeat),
        "peer": best_time(lambda: json.loads(json.dumps(row.calls)), repeat),
    }
    if row.kind in READ_AS_MEANT:
        out["strict"] = best_time(lambda: fmt.parse_strict(row.text), repeat)
    return out


def run(rows: list[Row], repeat: int) -> tuple[str, bool]:
    refiner = Refiner()
    by_family: dict[str, list] = defaultdict(list)
    for row in rows:
        by_family[row.family].append((judge(row, refiner), timings(row, refiner, repeat)))
    head = (f"{'family':<16}{'format':<16}{'rows':>5}{'as meant':>10}{'broken ok':>10}{'prose ok':>9}"
            f"{'detect µs':>11}{'strict µs':>11}{'lenient µs':>12}{'refine µs':>11}{'peer µs':>9}")
    lines = [head, "-" * len(head)]
    met = True
    failures = []
    for family in sorted(by_family):
        items = by_family[family]
        meant = [v for v, _ in items if v.row.kind in READ_AS_MEANT]
        broken = [v for v, _ in items if v.row.kind == "broken"]
        prose = [v for v, _ in items if v.row.kind == "prose"]
        rate = sum(v.agrees for v in meant) / len(meant) if meant else float("nan")
        met &= (not meant or rate >= TARGET) and all(v.agrees for v in broken + prose)
        failures += [v for v, _ in items if not v.agrees]

        def med(key: str) -> float:
            vals = [t[key] for _, t in items if key in t]
            return statistics.median(vals) * 1e6 if vals else float("nan")

        fmts = ",".join(sorted({v.row.format for v, _ in items}))
        lines.append(
            f"{family:<16}{fmts[:15]:<16}{len(items):>5}{rate:>10.1%}"
            f"{sum(v.agrees for v in broken):>6}/{len(broken):<3}{sum(v.agrees for v in prose):>5}/{len(prose):<3}"
            f"{med('detect'):>11.1f}{med('strict'):>11.1f}{med('lenient'):>12.1f}{med('refine'):>11.1f}{med('peer'):>9.1f}"
        )
    lines.append(f"target: >= {TARGET:.0%} read as meant per family, every broken and prose row right: "
                 f"{'met' if met else 'MISSED'}")
    for v in failures:
        lines.append(f"  not as meant: {v.row.where} ({v.row.kind}): {'; '.join(v.why)[:200]}")
    return "\n".join(lines), met


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--family", action="append", help="only these families")
    ap.add_argument("--limit", type=int, default=None, help="at most this many rows (a smoke run)")
    args = ap.parse_args(argv)
    rows = [r for r in load() if not args.family or r.family in args.family][: args.limit]
    table, _ = run(rows, args.repeat)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
