"""canitoolcall's fixtures (469 raw outputs of 9 open families, with the parse a correct engine returns), judged with
canitoolcall's own checks: the pipeline alone (calls only), and the real proxy in front of a scripted upstream
(content, reasoning and calls; non-streamed and streamed with several chunkings). The replay, the judging and the
tables are ``benchmarks/bench_conformance.py``; this test asserts today's measured floors (raise them as parsers
land) and writes the table to ``conformance-table.md`` in pytest's temporary directory (its path is printed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("canitoolcall")
pytest.importorskip("jsonschema")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_conformance as bc

# Measured on this branch (raise as the DSML / Gemma 4 / Kimi K3 parsers land).
LIBRARY_FLOOR = 366  # of 469 pass or soft pass, calls only


@pytest.fixture(scope="module")
def every_fixture():
    cases = bc.fixtures()
    assert len(cases) >= 469  # the package ships them all
    return cases


def test_library_calls_meet_the_floor(every_fixture, tmp_path_factory):
    cases, _ = bc.run_library(every_fixture)
    s = bc.summary(cases)
    out = tmp_path_factory.mktemp("conformance") / "conformance-library.md"
    out.write_text(bc.table("library, calls only", cases) + "\n", encoding="utf-8")
    print(f"\n{bc.table('library, calls only', cases)}\n(written to {out})")
    assert s["ok"] >= LIBRARY_FLOOR, bc.failures(cases, 40)
    assert s["leaks"] == 0
