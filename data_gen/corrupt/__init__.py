"""Corruptors: turn gold tool calls into plausible upstream mistakes, each labelled with its error classes.

- :mod:`data_gen.corrupt.rules`: seeded, no model (offline default).
- :mod:`data_gen.corrupt.llm`: asks upstream LLMs (any ``refiner.engines`` engine) to inject errors.
"""

from data_gen.corrupt.rules import (  # noqa: F401
    ERROR_CLASSES,
    ERROR_GROUPS,
    Corruption,
    CorruptionError,
    changes_something,
    corrupt,
)
