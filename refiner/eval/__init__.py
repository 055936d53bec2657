"""Evaluation: the paper's benchmarks (API-Bank, NESTFUL, Bamboogle*, BFCL) and corruption recovery, raw vs refined;
the tier-1 suite (tier 1 per error class and wire format on BFCL's gold, ``refiner.eval.tier1_suite``).

    from refiner.eval.runner import make_benchmark
    bench = make_benchmark("apibank")
    items = bench.load(limit=30)

See ``docs/evaluation.md`` and ``tool-refiner eval --help``.
"""

from __future__ import annotations

from refiner.eval.common import BenchItem, Benchmark  # noqa: F401
