"""Corruptors: turn gold tool calls into plausible upstream mistakes, each labelled with its error classes.

- :mod:`data_gen.corrupt.rules`: seeded, no model (offline default): the entry point ``corrupt``, built from
  :mod:`~data_gen.corrupt.labels` (error classes and groups, the ``Corruption`` label),
  :mod:`~data_gen.corrupt.call_errors` (name, content and order errors on the call list),
  :mod:`~data_gen.corrupt.text_errors` (format errors on the rendered text) and
  :mod:`~data_gen.corrupt.mutations` (look-alike names and values).
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
