"""Tier 1 per error class and wire format, under both spec policies, on BFCL's gold calls (the BFCL-derived suite).

BFCL's gold calls (simple / multiple / parallel / parallel_multiple and the live categories, from the ``bfcl-eval``
wheel), with BFCL's own specs for every other record and OpenAI tools for the rest, are rendered in every registered
wire format that can carry them and corrupted one error class at a time by the rule corruptor (seeded); the pipeline
without a model refines each text under the default spec policy and with ``trust_spec=True``
(:mod:`refiner.eval.tier1_suite`). Printed: coverage per format (records it cannot carry, classes that do not apply),
per class over all formats (fixed, harmed, the worst formats), per class and format for each policy, the targets met
or missed, and the time per input in the pipeline.

    python benchmarks/bench_tier1.py [--limit 2351] [--formats hermes,xlam] [--json results/tier1.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from refiner import formats
from refiner.eval import tier1_suite
from refiner.eval.bfcl import CATEGORIES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="records, spread over the categories (default: all 2,351)")
    ap.add_argument("--categories", default=",".join(CATEGORIES), help="comma-separated BFCL categories")
    ap.add_argument("--formats", default=None, help="comma-separated wire formats (default: every registered one)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bfcl-wheel", default=None, help="the bfcl-eval wheel (default .cache/bfcl/*.whl)")
    ap.add_argument("--json", default=None, help="also write the tables as JSON here")
    ap.add_argument("--no-matrices", action="store_true", help="leave out the per-format tables")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    fmts = [f.strip() for f in args.formats.split(",") if f.strip()] if args.formats else None
    for f in fmts or ():
        formats.get(f)  # an unknown name fails here, with the known ones listed
    cases = tier1_suite.load_cases(args.bfcl_wheel, [c.strip() for c in args.categories.split(",") if c.strip()],
                                   args.limit, seed=args.seed)
    result = tier1_suite.run_suite(cases, fmts=fmts, seed=args.seed, progress=not args.quiet)
    print(tier1_suite.render_tables(result, matrices=not args.no_matrices))
    n = len(result.inputs.items)
    print("\nTime in the pipeline (no model, 1 process): " + ", ".join(
        f"{p} {1e3 * s / max(1, n):.2f} ms per input" for p, s in result.seconds.items()))
    verdicts = tier1_suite.check_targets(result)
    print(f"targets met: {sum(v.met for v in verdicts)} of {len(verdicts)}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(tier1_suite.summary(result), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
