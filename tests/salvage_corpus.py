"""The salvage corpus (``tests/corpus/salvage/*.jsonl``): answers that hold tool calls somewhere other than where the
requested format puts them (or that only talk), and what a careful reader recovers from each. Used by
``tests/test_salvage_corpus.py`` and ``benchmarks/bench_salvage.py``.

One JSON object per line:

- ``id``: unique within its file; ``shape``: the failure shape (``prose_after``, ``fence_json``, ``talk_ask``, ...);
- ``kind``: ``call`` (the answer holds calls) or ``talk`` (it only talks: no call may be read);
- ``format``: the format the answer was asked for (the request's ``format``; ``null``: left to auto-detection);
- ``text``: the answer, exactly as the model wrote it;
- ``calls``: what a careful reader recovers, ``[{"name": ..., "arguments": {...}}]`` in order (``[]`` for talk);
- the task, one of: ``bfcl_id`` (and ``category``): a BFCL question, whose specs and possible answers are read from
  the bfcl-eval wheel (:mod:`refiner.eval.bfcl`); or ``tools``: the tool list (any spec dialect), or none;
- ``note`` (optional).

``bfcl_generated.jsonl`` is written by ``generate.py`` (seeded; a test checks the committed file is its output);
``hand.jsonl`` holds hand-written rows for odd shapes and the other registered formats.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_rows import read_rows

CORPUS_DIR = Path(__file__).resolve().parent / "corpus" / "salvage"
KINDS = ("call", "talk")


@dataclass
class Row:
    where: str  # file:line
    id: str
    shape: str
    kind: str
    format: str | None
    text: str
    calls: list[dict]
    bfcl_id: str | None = None
    category: str | None = None
    tools: Any = None
    note: str = ""

    def request(self, samples: dict | None = None) -> dict:
        """The pipeline request for this row (a BFCL row needs the loaded BFCL samples by id)."""
        if self.bfcl_id is not None:
            if samples is None or f"bfcl-{self.bfcl_id}" not in samples:
                raise KeyError(f"{self.where}: BFCL question {self.bfcl_id!r} is not loaded")
            req = samples[f"bfcl-{self.bfcl_id}"].refine_request(self.text)
        else:
            req = {"upstream": self.text}
            if self.tools is not None:
                req["tools"] = self.tools
        if self.format is None:
            req.pop("format", None)
        else:
            req["format"] = self.format
        return req


def load(directory: Path = CORPUS_DIR) -> list[Row]:
    """Every row of every corpus file; a malformed row raises ``ValueError`` naming its file, line and field."""
    rows = []
    fields = (("id", str), ("shape", str), ("kind", str), ("text", str), ("calls", list))
    for where, obj in read_rows(directory, fields, KINDS):
        if obj["kind"] == "talk" and obj["calls"]:
            raise ValueError(f"{where}: field 'calls' must be empty for a talk row")
        for i, c in enumerate(obj["calls"]):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                raise ValueError(f"{where}: field 'calls' item {i} has no name")  # noqa: TRY004
        rows.append(Row(where, obj["id"], obj["shape"], obj["kind"], obj.get("format", "toolace"), obj["text"],
                        obj["calls"], obj.get("bfcl_id"), obj.get("category"), obj.get("tools"),
                        obj.get("note", "")))
    ids = [r.id for r in rows]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"{directory}: duplicate row ids {dupes[:5]}")
    return rows


def keys(calls: list[dict]) -> list[str]:
    """Calls as comparable texts (name and canonical arguments), in order."""
    return [json.dumps([c["name"], c.get("arguments") or {}], sort_keys=True, ensure_ascii=False, default=repr)
            for c in calls]


def bfcl_samples(rows: list[Row]) -> dict:
    """The BFCL samples the rows ask about, by sample id (``{}`` when no row is a BFCL one); raises
    ``FileNotFoundError`` when the bfcl-eval wheel is missing."""
    cats = tuple(sorted({r.category for r in rows if r.bfcl_id is not None}))
    if not cats:
        return {}
    from refiner.eval.bfcl import BFCL

    return {s.id: s for s in BFCL(categories=cats).load(None)}
