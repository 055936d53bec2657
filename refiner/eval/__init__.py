"""Evaluation: the paper's benchmarks and corruption recovery, raw vs refined, and the tier-1 suite
(``runner.make_benchmark("apibank").load(limit=30)``; see docs/evaluation.md and ``tool-refiner eval --help``)."""
