"""Evaluation: the paper's benchmarks (API-Bank, NESTFUL, Bamboogle*, BFCL) and corruption recovery, raw vs refined.

    from refiner.eval.runner import make_benchmark
    bench = make_benchmark("apibank")
    samples = bench.load(limit=30)

See ``docs/evaluation.md`` and ``tool-refiner eval --help``.
"""

from __future__ import annotations

from refiner.eval.common import Benchmark, Sample  # noqa: F401


def benchmark_classes() -> dict[str, type]:
    """Benchmark classes by name (imported lazily so a missing optional piece fails only when used)."""
    from refiner.eval.apibank import APIBank
    from refiner.eval.bamboogle import BamboogleStar
    from refiner.eval.bfcl import BFCL
    from refiner.eval.nestful import NESTFUL

    return {c.name: c for c in (APIBank, NESTFUL, BamboogleStar, BFCL)}
