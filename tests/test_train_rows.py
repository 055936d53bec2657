"""RL rows for the training tests (the data builder's smoke mix from the real local sources) and the parquet
validation that guards every launch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refiner import formats
from refiner.train.errors import TrainConfigError
from refiner.train.inputs import RL_COLUMNS, find_data_files, rl_to_sft_parquet, validate_rl_parquet


def write_parquet(rows: list[dict], path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.fixture(scope="session")
def built_dir(tmp_path_factory) -> Path:
    """The data builder's smoke mix from the real local sources (``train.parquet`` + ``validation.parquet``)."""
    from conftest import ROOT, shared_path

    from data_gen.builder import build
    from data_gen.config import load_config

    out = tmp_path_factory.mktemp("built")

    glaive = {"path": str(shared_path("glaive_demo")), "limit": 40}
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

    train, val = find_data_files(rl_data_dir)
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


@pytest.mark.parametrize("prompt", [[], [{"role": "user", "content": None}]])
def test_a_prompt_that_is_not_messages_names_row_and_field(tmp_path, rl_rows, prompt):
    rows = [dict(r) for r in rl_rows[:3]]
    rows[1] = {**rows[1], "prompt": prompt}
    p = write_parquet(rows, tmp_path / "train.parquet")
    with pytest.raises(TrainConfigError, match=r"row 1, field 'prompt': must be a non-empty list"):
        validate_rl_parquet(p)


def test_bad_ground_truth_names_row_and_field(tmp_path, rl_rows):
    rows = [dict(r) for r in rl_rows[:3]]
    rows[2] = {**rows[2], "reward_model": {"style": "rule", "ground_truth": "{not json"}}
    p = write_parquet(rows, tmp_path / "train.parquet")
    with pytest.raises(TrainConfigError, match=r"row 2, field 'reward_model.ground_truth': .*not valid JSON"):
        validate_rl_parquet(p)


@pytest.mark.parametrize(
    ("gt", "why"),
    [
        ({"format": "hermes"}, r"field 'answer' is missing"),
        ({"format": "no_such_format", "answer": "x"}, r"field 'format'.*no_such_format"),
        ({"format": "xlam", "answer": "<func_call>[{\"name\": 1}]</func_call>"}, r"'answer' is not valid xlam"),
        ({"format": "xlam", "answer": "[]", "order_sensitive": "yes"}, r"'order_sensitive' must be true/false"),
    ],
)
def test_launch_checks_read_the_ground_truth_as_the_reward_does(tmp_path, rl_rows, gt, why):
    """The pre-launch parquet check uses the reward's reader: a row the reward would reject stops the launch."""
    rows = [dict(r) for r in rl_rows[:3]]
    rows[1] = {**rows[1], "reward_model": {"style": "rule", "ground_truth": json.dumps(gt)}}
    p = write_parquet(rows, tmp_path / "train.parquet")
    with pytest.raises(TrainConfigError, match=rf"row 1, field 'reward_model.ground_truth': .*{why}"):
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


def test_a_held_out_test_split_is_never_the_trainers_validation_file(rl_data_dir, tmp_path):
    """The builder writes ``test.parquet`` next to ``validation.parquet`` when the split asks for a test share
    (configs/data/left-to-model.yaml); the trainer validates on ``validation.parquet``, and falls back to a test file
    only in a folder that has nothing else."""
    import shutil

    both = tmp_path / "both"
    both.mkdir()
    for name in ("train.parquet", "validation.parquet"):
        shutil.copy(rl_data_dir / name, both / name)
    shutil.copy(rl_data_dir / "validation.parquet", both / "test.parquet")
    assert find_data_files(both)[1].name == "validation.parquet"
    (both / "validation.parquet").unlink()
    assert find_data_files(both)[1].name == "test.parquet"
