"""Every row of the dialect corpus (``tests/corpus/dialects``, see ``tests/dialect_corpus.py``) is read as its model
meant it, through auto-detection and tier 1; valid rows also parse strictly in their format and survive a round
trip (with the row's tools, after the format settles values by their declared types); every registered format has
rows of every kind but ``prose``."""

from __future__ import annotations

from collections import defaultdict

import pytest
from dialect_corpus import READ_AS_MEANT, expected_calls, judge, load

from refiner import formats
from refiner.formats.reading import tool_index
from refiner.pipeline import Refiner
from refiner.specs import load_tools

ROWS = load()


def test_the_corpus_has_every_kind_for_each_family():
    kinds = defaultdict(set)
    for r in ROWS:
        kinds[r.family].add(r.kind)
    missing = {f: sorted({"valid", "multi", "odd", "broken"} - k) for f, k in kinds.items()}
    assert not {f: m for f, m in missing.items() if m}, missing


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.family}-{r.kind}-{r.where}" for r in ROWS])
def test_row_is_read_as_meant(row):
    verdict = judge(row, Refiner())
    assert verdict.agrees, (row.where, verdict.why, row.text[:300])
    if row.kind in READ_AS_MEANT:
        fmt = formats.get(row.format)
        calls = fmt.parse_strict(row.text)
        if row.tools is not None:  # values written as untyped text take the types the tools declare
            calls = fmt.retype(calls, tool_index(load_tools(row.tools)))
        assert calls == expected_calls(row), row.where
        assert fmt.parse_strict(fmt.render(calls)) == calls, row.where
