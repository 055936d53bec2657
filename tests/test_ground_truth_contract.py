"""The reward ground truth has one writer (``rewards.make_ground_truth``) and one reader
(``rewards.parse_ground_truth``): the data builder, the LLM corruptor, the pre-launch checks and the reward use them,
and nobody else spells the dict out. The data builder and the LLM corruptor import each other's pieces at module top
(no import hidden in a function to dodge a cycle)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from refiner import formats
from refiner.calls import ToolCall
from rewards import GroundTruthError, make_ground_truth, parse_ground_truth

SCANNED = ("data_gen", "refiner", "rewards", "benchmarks")


def _py_files():
    for top in SCANNED:
        yield from sorted((ROOT / top).rglob("*.py"))


def test_nobody_but_the_writer_spells_out_the_ground_truth_dict():
    """A dict literal with both 'format' and 'answer' keys is a hand-written ground truth."""
    found = []
    for path in _py_files():
        if path == ROOT / "rewards" / "ground_truth.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if {"format", "answer"} <= keys:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"ground truth written by hand at {found}; use rewards.make_ground_truth"


def _is_json_loads(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "loads"


def test_nobody_but_the_reader_parses_the_ground_truth_json():
    """``json.loads(<...ground_truth...>)`` or ``json.loads(...)["answer"]`` outside the reader is a second reader."""
    found = []
    for path in _py_files():
        if path == ROOT / "rewards" / "ground_truth.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if _is_json_loads(node) and node.args and "ground_truth" in ast.unparse(node.args[0]):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if (isinstance(node, ast.Subscript) and _is_json_loads(node.value)
                    and isinstance(node.slice, ast.Constant) and node.slice.value in ("answer", "format")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"ground truth parsed by hand at {found}; use rewards.parse_ground_truth"


@pytest.mark.parametrize("fmt", ["hermes", "xlam", "toolace", "nestools", "order", "glaive"])
def test_writer_and_reader_round_trip(fmt):
    wf = formats.get(fmt)
    if fmt == "order":
        calls = [ToolCall("a", {}, step=1), ToolCall("b", {}, step=2)]
    elif fmt == "nestools":
        calls = [ToolCall("a", {"x": 1}, ("API_call_0",)), ToolCall("b", {"y": "API_call_0"}, ("API_call_1",))]
    else:
        calls = [ToolCall("get_weather", {"city": "Oslo", "days": 3})]
    gt = make_ground_truth(fmt, calls)
    fields = parse_ground_truth(gt).fields()
    assert fields == {"format": fmt, "answer": wf.render(calls), "order_sensitive": wf.order_sensitive}
    assert json.loads(gt) == fields
    assert parse_ground_truth(fields).fields() == fields  # a mapping reads the same as its JSON
    assert make_ground_truth(fmt, calls, order_sensitive=not wf.order_sensitive) != gt


def test_reader_keeps_the_answer_text_as_written():
    answer = '<func_call>[ {"name": "f",   "arguments": {"a": 1}} ]</func_call>'
    gold = parse_ground_truth({"format": "xlam", "answer": answer})
    assert gold.answer == answer and gold.fields()["order_sensitive"] is formats.get("xlam").order_sensitive
    with pytest.raises(GroundTruthError, match="field 'answer' is not valid xlam"):
        parse_ground_truth({"format": "xlam", "answer": answer[:-12]})


def test_builder_and_llm_corruptor_import_without_a_cycle():
    """Each module imports cleanly first in a fresh interpreter, and neither hides a data_gen import in a function."""
    for mod in ("data_gen.corrupt.llm", "data_gen.builder", "data_gen.sources"):
        subprocess.run([sys.executable, "-c", f"import {mod}"], check=True, cwd=ROOT, timeout=120)
    for rel in ("data_gen/builder.py", "data_gen/corrupt/llm.py", "data_gen/sources/base.py",
                "data_gen/sources/__init__.py", "data_gen/config.py"):
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("data_gen", "rewards")):
                        pytest.fail(f"{rel}:{node.lineno} imports {node.module} inside {fn.name}()")


def test_builder_rows_are_written_by_the_writer(tmp_path):
    from conftest import shared_path

    from data_gen.builder import build
    from data_gen.config import load_config

    cfg = load_config(ROOT / "configs" / "data" / "smoke.yaml", sources={
        "glaive": {"path": str(shared_path("glaive_demo")), "limit": 20},
        "nestools": {"path": str(shared_path("nestools", "test_data.jsonl")), "limit": 20}})
    build(cfg, tmp_path, progress=False)
    import pandas as pd

    rows = pd.read_parquet(Path(tmp_path) / "train.parquet").to_dict("records")
    assert rows
    for r in rows:
        gt = r["reward_model"]["ground_truth"]
        gold = parse_ground_truth(gt)
        assert gt == make_ground_truth(gold.fmt.name, list(gold.calls))
        assert gold.fmt.name == r["extra_info"]["format"]
