"""SFT warm start data: verl SFT rows from the RL rows (the correct calls as the assistant turn)."""

from __future__ import annotations

from pathlib import Path

from refiner.train.inputs import parse_ground_truth, validate_rl_parquet


def rl_to_sft_parquet(src: str | Path, dst: str | Path) -> int:
    """Writes verl SFT rows (``messages`` = the RL prompt + the correct answer as the assistant turn) from an RL
    parquet. Returns the row count; raises :class:`TrainConfigError` naming file, row and field on bad rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    validate_rl_parquet(src)
    rows = pq.read_table(src).to_pylist()
    out = []
    for i, row in enumerate(rows):
        gt = parse_ground_truth(row["reward_model"]["ground_truth"], f"{src}, row {i}")
        messages = [{"role": m["role"], "content": m["content"]} for m in row["prompt"]]
        messages.append({"role": "assistant", "content": gt["answer"]})
        out.append(
            {
                "messages": messages,
                "data_source": row["data_source"],
                "prompt": messages[:-1],
                "response": gt["answer"],
                "extra_info": row["extra_info"],
            }
        )
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(out), dst)
    return len(out)
