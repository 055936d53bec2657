"""Every row of the salvage corpus (``tests/corpus/salvage``, see ``tests/salvage_corpus.py``) is read by tier 1 as a
careful reader does: the pipeline (``Refiner().refine``, no model, the row's format given or left to detection)
returns the row's calls, and none for an answer that only talks. Also: the generated file is the generator's output,
and the benchmark runs at a tiny size."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from salvage_corpus import CORPUS_DIR, bfcl_samples, keys, load

from refiner import formats
from refiner.pipeline import Refiner

ROOT = Path(__file__).resolve().parents[1]
ROWS = load()


@pytest.fixture(scope="module")
def samples():
    try:
        return bfcl_samples(ROWS)
    except FileNotFoundError as e:
        pytest.skip(str(e))


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_corpus_covers_the_failure_shapes():
    shapes = {r.shape for r in ROWS}
    for shape in ("prose_after", "prose_before", "lists_per_line", "bare_lines", "bare_semicolon", "fence_python",
                  "fence_plain", "fence_indented", "code_return", "fence_json", "json_single_quotes", "hermes",
                  "quoted_strings", "md_escaped", "other_format", "auto_format"):
        assert shape in shapes, shape
    talk = [r for r in ROWS if r.kind == "talk"]
    assert len(ROWS) >= 400 and len(talk) >= 60


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_row_is_read_as_a_careful_reader_does(row, request):
    samples = request.getfixturevalue("samples") if row.bfcl_id else {}
    res = Refiner().refine(row.request(samples))
    got = [{"name": c["name"], "arguments": c["arguments"]} for c in res["calls"]]
    assert keys(got) == keys(row.calls), (row.where, row.text[:300], got)
    if row.kind == "talk":
        assert res["stage"] == "unchanged" and res["refined"] == row.text, row.where
        return
    out_fmt = res["format"]
    assert formats.get(out_fmt).parse_strict(res["refined"]) == formats.get(out_fmt).parse_strict(res["refined"])
    if row.format is not None:
        assert out_fmt == row.format, row.where
    if res["stage"] == "repaired" and not formats.get(out_fmt).is_valid(row.text):
        kinds = {a["code"] for a in res["actions"]}
        assert kinds & {"salvage", "parse_repair", "normalise_format"}, (row.where, res["actions"])


def test_salvage_actions_say_where_the_calls_were_found():
    by_id = {r.id: r for r in ROWS}
    res = Refiner().refine(by_id["hand-two-fences"].request())
    (action,) = [a for a in res["actions"] if a["code"] == "salvage"]
    assert "code fence" in action["message"] and "not valid toolace" in action["message"]
    assert formats.get("toolace").parse_strict(res["refined"])[0].arguments == {"city": "Paris", "unit": "celsius"}


def test_auto_format_answers_in_the_dialect_found():
    by_id = {r.id: r for r in ROWS}
    res = Refiner().refine(by_id["hand-auto-fence"].request())
    assert res["format"] == "toolace" and res["refined"].startswith("<function_list>[get_weather(")


def test_generated_file_is_the_generators_output(samples):
    gen = _module(CORPUS_DIR / "generate.py", "salvage_corpus_generate")
    assert gen.dump(gen.generate()) == (CORPUS_DIR / "bfcl_generated.jsonl").read_text(encoding="utf-8")


def test_benchmark_tiny_run(samples):
    bench = _module(ROOT / "benchmarks" / "bench_salvage.py", "bench_salvage")
    shapes = ("prose_before", "positional", "talk_signature", "hermes")
    rows = [r for shape in shapes for r in [r for r in ROWS if r.bfcl_id and r.shape == shape][:8]]
    text, summary = bench.run(rows)
    assert "recovery tier 1 / naive" in text and "talk_signature" in text
    assert summary["invented_tier1"] == 0 and summary["invented_naive"] > 0
    assert summary["tier1"] > summary["naive"] and summary["met"]


def test_naive_peer_reads_the_shapes_it_is_built_for():
    bench = _module(ROOT / "benchmarks" / "bench_salvage.py", "bench_salvage")
    names = ["get_weather"]
    assert [c.to_dict() for c in bench.naive_extract('Sure: [get_weather(city="Paris")] ok', names)] == [
        {"name": "get_weather", "arguments": {"city": "Paris"}}]
    hermes = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert bench.naive_extract(hermes, names)[0].arguments == {"city": "Paris"}
    assert bench.naive_extract("{'name': 'get_weather', 'parameters': {'city': 'Paris'}}", [])[0].name == "get_weather"
    assert bench.naive_extract("I can't help.", names) == []
