"""API-Bank (paper Table 1) as ToolRL processed it: levels 1-3, exact match of the calls, JSON types included, with
the paper's refiner-side adjustments (see docs/evaluation.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from refiner import formats
from refiner.calls import ToolCall, calls_equal
from refiner.eval import common
from refiner.eval.common import BenchItem, Benchmark

LEVELS = (1, 2, 3)

ADJUSTMENT_HINT = (
    "Output only the corrected tool calls, with no <response> part, in this form: <tool_call> followed by one JSON "
    'object per line, {"name": "Tool name", "parameters": {"Parameter name": "Parameter content"}}, then '
    "</tool_call>. Keep correct calls as they are and append any call that is missing. Write every numeric "
    "parameter value (int or float) as a quoted string."
)


def numbers_to_strings(value: Any) -> Any:
    """Every int/float inside a JSON value as a string (booleans untouched)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return [numbers_to_strings(v) for v in value]
    if isinstance(value, Mapping):
        return {k: numbers_to_strings(v) for k, v in value.items()}
    return value


def gold_calls(record: Mapping[str, Any], where: str) -> list[ToolCall]:
    """The record's ``answer`` (a list in levels 1 and 3, a single object in level 2) as calls."""
    answer = record.get("answer")
    items = answer if isinstance(answer, list) else [answer]
    return [ToolCall(*common.json_call(item, "parameters", f"{where}: field 'answer'[{i}]"))
            for i, item in enumerate(items)]


class APIBank(Benchmark):
    name = "apibank"
    title = "API-Bank (Table 1)"
    metrics = ("acc",)

    def __init__(self, data_dir: Path | None = None, adjustments: bool = True) -> None:
        super().__init__()
        self.dir = Path(data_dir or common.default_data_dir()) / "api_bank"
        self.adjustments = adjustments

    def load(self, limit: int | None = None) -> list[BenchItem]:
        per_level = common.per_part(limit, len(LEVELS))
        out: list[BenchItem] = []
        for lvl in LEVELS:
            path = self.dir / f"level-{lvl}-api_processed.json"
            records = common.read_records(path, f"API-Bank level {lvl}")
            for i, rec in common.spread(list(enumerate(records)), per_level):
                where = f"{path} record {i}"
                for key in ("system", "user"):
                    if not isinstance(rec.get(key), str):
                        raise ValueError(f"{where}: field {key!r} missing or not a string")
                # API-Bank's gold writes every value as text: the benchmark says so to tier 1
                meta = {"value_style": "text", **({"format_hint": ADJUSTMENT_HINT} if self.adjustments else {})}
                out.append(BenchItem(f"apibank-L{lvl}-{i}", self.name, f"level-{lvl}", rec["system"], rec["user"],
                                     tools=rec["system"], fmt="apibank", gold=gold_calls(rec, where), meta=meta))
        return out

    def score(self, item: BenchItem, text: str) -> dict[str, float]:
        """ToolRL's exact match: a strictly valid text whose calls equal the gold calls (as a multiset)."""
        calls = self.read(item, text)
        return {"acc": float(calls is not None and calls_equal(calls, item.gold, ordered=False))}

    def postprocess_refined(self, item: BenchItem, refined: str) -> str:
        calls = self.read(item, refined) if self.adjustments else None
        if calls is None:
            return refined
        return formats.get("apibank").render([ToolCall(c.name, numbers_to_strings(dict(c.arguments))) for c in calls])
