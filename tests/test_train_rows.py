"""RL rows for the training tests, built from real glaive demo records with the refiner prompt and the real reward
ground truth (the same columns the data builder writes), and the parquet validation that guards every launch."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from refiner import formats
from refiner import train as T
from refiner.calls import ToolCall
from refiner.prompt import build_messages
from refiner.train import RL_COLUMNS, TrainConfigError, rl_to_sft_parquet, validate_rl_parquet


def glaive_examples(records: list[dict], limit: int) -> list[dict]:
    """``{"tools", "query", "gold": [ToolCall]}`` for glaive records whose first tool call is a JSON object."""
    out = []
    for rec in records:
        convo = rec["conversations"]
        for i, turn in enumerate(convo):
            if turn["from"] != "function_call":
                continue
            try:
                obj = json.loads(turn["value"])
            except json.JSONDecodeError:
                break
            args = obj.get("arguments")
            if isinstance(args, str):
                args = json.loads(args)
            query = [
                {"role": "user" if t["from"] == "human" else "assistant", "content": t["value"]} for t in convo[:i]
            ]
            out.append({"tools": rec["tools"], "query": query, "gold": [ToolCall(obj["name"], args or {})]})
            break
        if len(out) >= limit:
            break
    return out


def corrupt_value(call: ToolCall, rng: random.Random) -> ToolCall:
    """A wrong version of a call: one argument value changed (or a misspelled name when there are none)."""
    if not call.arguments:
        return ToolCall(call.name + "_x", {})
    key = rng.choice(sorted(call.arguments))
    return ToolCall(call.name, {**call.arguments, key: "WRONG"})


def build_rl_rows(records: list[dict], n: int, seed: int = 0) -> list[dict]:
    """verl RL rows: prompt = refiner messages on a corrupted upstream, ground truth = the gold hermes calls."""
    from rewards import make_ground_truth

    rng = random.Random(seed)
    hermes = formats.get("hermes")
    rows = []
    for idx, ex in enumerate(glaive_examples(records, n)):
        upstream = hermes.render([corrupt_value(c, rng) for c in ex["gold"]])
        system = "You can call these tools:\n" + ex["tools"]
        rows.append(
            {
                "data_source": "glaive",
                "prompt": build_messages(system, ex["query"], upstream),
                "ability": "tool_refine",
                "reward_model": {"style": "rule", "ground_truth": make_ground_truth("hermes", ex["gold"])},
                "extra_info": {"upstream": upstream, "index": idx, "split": "train", "source": "glaive"},
            }
        )
    return rows


def write_parquet(rows: list[dict], path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.fixture(scope="session")
def built_dir(tmp_path_factory, glaive_records) -> Path:
    """The data builder's smoke mix from the real local sources (``train.parquet`` + ``validation.parquet``);
    rows built here from glaive records when the builder is not importable."""
    out = tmp_path_factory.mktemp("built")
    try:
        from data_gen.builder import build
        from data_gen.config import load_config
    except ImportError:
        rows = build_rl_rows(glaive_records, 40)
        write_parquet(rows[:32], out / "train.parquet")
        write_parquet(rows[32:], out / "validation.parquet")
        return out
    from conftest import ROOT, shared_path

    glaive = {"path": str(shared_path("glaive_demo")), "limit": 40}
    try:
        formats.get("glaive")
    except KeyError:
        glaive["format"] = "hermes"
    sources = {"glaive": glaive, "nestools": {"path": str(shared_path("nestools", "test_data.jsonl")), "limit": 40}}
    build(load_config(ROOT / "configs" / "data" / "smoke.yaml", sources=sources), out, progress=False)
    return out


@pytest.fixture(scope="session")
def rl_rows(built_dir) -> list[dict]:
    """Every built row (train first, then validation), as verl reads them."""
    import pyarrow.parquet as pq

    rows = [r for name in ("train", "validation") for r in pq.read_table(built_dir / f"{name}.parquet").to_pylist()]
    assert len(rows) >= 30
    return rows


@pytest.fixture
def rl_data_dir(built_dir) -> Path:
    return built_dir


def test_built_rows_pass_validation_and_score_gold_as_correct(rl_data_dir, rl_rows):
    from rewards import compute_score

    train, val = T.find_data_files(rl_data_dir)
    summary = validate_rl_parquet(train, min_rows=16)
    assert summary["rows"] >= 16 and sum(summary["mix"].values()) == summary["rows"]
    assert validate_rl_parquet(val)["rows"] >= 1
    corrupted = [r for r in rl_rows if r["extra_info"].get("label", "corrupted") == "corrupted"]
    assert corrupted
    for row in corrupted[:10]:
        gt = json.loads(row["reward_model"]["ground_truth"])
        good = compute_score(row["data_source"], gt["answer"], row["reward_model"]["ground_truth"], row["extra_info"])
        bad = compute_score(
            row["data_source"], row["extra_info"]["upstream"], row["reward_model"]["ground_truth"], row["extra_info"]
        )
        assert good["acc"] == 1.0 and good["score"] == 1.0
        assert bad["score"] < good["score"]


def test_missing_parquet_is_named(tmp_path):
    with pytest.raises(TrainConfigError, match="parquet file not found: .*nope.parquet"):
        validate_rl_parquet(tmp_path / "nope.parquet")


def test_wrong_columns_are_named(tmp_path, rl_rows):
    rows = [{k: v for k, v in r.items() if k != "ability"} for r in rl_rows[:3]]
    p = write_parquet(rows, tmp_path / "train.parquet")
    with pytest.raises(TrainConfigError, match=r"train.parquet: missing column\(s\) ability"):
        validate_rl_parquet(p)


def test_bad_ground_truth_names_row_and_field(tmp_path, rl_rows):
    rows = [dict(r) for r in rl_rows[:3]]
    rows[2] = {**rows[2], "reward_model": {"style": "rule", "ground_truth": "{not json"}}
    p = write_parquet(rows, tmp_path / "train.parquet")
    with pytest.raises(TrainConfigError, match=r"row 2, field 'reward_model.ground_truth': not JSON"):
        validate_rl_parquet(p)


def test_too_few_rows_for_one_batch(tmp_path, rl_rows):
    p = write_parquet(rl_rows[:5], tmp_path / "train.parquet")
    with pytest.raises(TrainConfigError, match="5 rows, need at least 16"):
        validate_rl_parquet(p, min_rows=16)


def test_not_a_parquet_file(tmp_path):
    p = tmp_path / "train.parquet"
    p.write_text("hello")
    with pytest.raises(TrainConfigError, match="not a readable parquet"):
        validate_rl_parquet(p)


def test_sft_conversion_appends_the_correct_calls(tmp_path, rl_data_dir):
    import pyarrow.parquet as pq

    n = rl_to_sft_parquet(rl_data_dir / "train.parquet", tmp_path / "sft" / "train.parquet")
    assert n == validate_rl_parquet(rl_data_dir / "train.parquet")["rows"]
    src = pq.read_table(rl_data_dir / "train.parquet").to_pylist()
    out = pq.read_table(tmp_path / "sft" / "train.parquet").to_pylist()
    for s, o in zip(src, out):
        answer = json.loads(s["reward_model"]["ground_truth"])["answer"]
        assert o["messages"][:-1] == [{"role": m["role"], "content": m["content"]} for m in s["prompt"]]
        assert o["messages"][-1] == {"role": "assistant", "content": answer}
        fmt = json.loads(s["reward_model"]["ground_truth"])["format"]
        assert formats.get(fmt).parse_strict(o["messages"][-1]["content"])
    assert set(RL_COLUMNS) - {"ability", "reward_model"} <= set(out[0]) | {"prompt"}
