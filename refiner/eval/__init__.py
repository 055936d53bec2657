"""Evaluation: the paper's benchmarks (API-Bank, NESTFUL, Bamboogle*, BFCL) and corruption recovery, raw vs refined.

    from refiner.eval.runner import make_benchmark
    bench = make_benchmark("apibank")
    items = bench.load(limit=30)

See ``docs/evaluation.md`` and ``tool-refiner eval --help``.
"""

from __future__ import annotations

from refiner.eval.common import BenchItem, Benchmark  # noqa: F401
