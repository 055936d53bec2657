"""The library runs on every Python the README names (3.10 up): no pattern it compiles uses what only a later ``re``
reads (possessive quantifiers and atomic groups came with 3.11; 3.10 refuses them when the module is imported)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys

import pytest

import refiner
from refiner.formats import reasoning

_LATER = ("POSSESSIVE_REPEAT", "ATOMIC_GROUP")


def _patterns(value, depth=0):
    if isinstance(value, re.Pattern):
        yield value
    elif depth < 3 and isinstance(value, dict):
        for v in value.values():
            yield from _patterns(v, depth + 1)
    elif depth < 3 and isinstance(value, (list, tuple)):
        for v in value:
            yield from _patterns(v, depth + 1)


def _ops(tree):
    for op, arg in tree:
        yield str(op)
        for part in arg if isinstance(arg, (list, tuple)) else (arg,):
            if isinstance(part, re._parser.SubPattern):
                yield from _ops(part)
            elif isinstance(part, (list, tuple)):
                for sub in part:
                    if isinstance(sub, re._parser.SubPattern):
                        yield from _ops(sub)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the check reads 3.11's pattern parser")
def test_no_compiled_pattern_needs_python_3_11():
    found = {}
    for info in pkgutil.walk_packages(refiner.__path__, "refiner."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # (an optional dependency the test stack lacks)
            continue
        for name, value in vars(module).items():
            for p in _patterns(value):
                found[f"{info.name}.{name}: {p.pattern[:60]!r}"] = p
    for name, value in reasoning._state().items():  # (built at first use)
        for p in _patterns(value):
            found[f"reasoning._state()[{name!r}]: {p.pattern[:60]!r}"] = p
    assert len(found) > 100
    later = [where for where, p in found.items()
             if isinstance(p.pattern, str) and set(_ops(re._parser.parse(p.pattern, p.flags))) & set(_LATER)]
    assert not later
