"""The corpus of raw model outputs per tool-call dialect (``tests/corpus/dialects/*.jsonl``) and how a reading of
one is judged. Used by ``tests/test_dialect_corpus.py`` and ``benchmarks/bench_dialects.py``.

One JSON object per line:

- ``family``: the model family that writes it (``qwen3_coder``, ``glm45``, ``mistral_v11``, ...);
- ``format``: the registry format name that must read it (detection must name it for ``valid``/``multi``/``odd``);
- ``kind``: ``valid`` (one call, as the model's chat template and published parser define it), ``multi`` (several
  calls), ``odd`` (nested, unicode, escapes, empty arguments, numbers, reasoning or prose around it),
  ``broken`` (cut short, a tag lost, malformed JSON inside: must be repaired or reported, never misread) or
  ``prose`` (an answer that only talks: no call may be read);
- ``text``: the raw output, exactly as the model emits it (special tokens as text);
- ``calls``: the calls the model meant, ``[{"name": ..., "arguments": {...}}]``; for ``broken`` rows the calls a careful
  reader recovers (possibly fewer: a call the text stops inside is left out, and reported), for ``prose`` rows ``[]``;
- ``tools`` (optional): the tool list the model was given (any spec dialect);
- ``source``: where the grammar was taken from (the chat template or parser file), ``note`` (optional).

A reading is judged through the public path a user takes: ``Refiner().refine({"upstream": text, "tools": ...})`` with
the format left to auto-detection (named in the request for a row detection never names). It *agrees* when its calls equal ``calls`` (names and canonical arguments, in
order); a ``broken`` row must also be reported (the upstream's gate diagnostics hold a ``format`` error).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_rows import read_rows

from refiner import formats
from refiner.calls import ToolCall, canonical_json
from refiner.pipeline import Refiner

CORPUS_DIR = Path(__file__).resolve().parent / "corpus" / "dialects"
KINDS = ("valid", "multi", "odd", "broken", "prose")
READ_AS_MEANT = ("valid", "multi", "odd")


@dataclass
class Row:
    where: str  # file:line
    family: str
    format: str
    kind: str
    text: str
    calls: list[dict]
    tools: Any = None
    source: str = ""
    note: str = ""

    def request(self) -> dict:
        req: dict[str, Any] = {"upstream": self.text}
        if formats.get(self.format).detection.by_name:  # (a row detection never names: the user names it)
            req["format"] = self.format
        if self.tools is not None:
            req["tools"] = self.tools
        return req


@dataclass
class Verdict:
    row: Row
    agrees: bool
    detected: str | None
    got: list[dict]
    stage: str
    reported: bool
    why: list[str] = field(default_factory=list)


def load(directory: Path = CORPUS_DIR) -> list[Row]:
    """Every row of every corpus file; a malformed row raises ``ValueError`` naming its file, line and field."""
    rows = []
    fields = (("family", str), ("format", str), ("kind", str), ("text", str), ("calls", list))
    for where, obj in read_rows(directory, fields, KINDS):
        if obj["format"] not in formats.names():
            raise ValueError(f"{where}: field 'format': unknown wire format {obj['format']!r}")
        rows.append(Row(where, obj["family"], obj["format"], obj["kind"], obj["text"], obj["calls"],
                        obj.get("tools"), obj.get("source", ""), obj.get("note", "")))
    return rows


def _key(calls: list[dict]) -> list[str]:
    return [canonical_json({"name": c["name"], "arguments": c.get("arguments") or {}}) for c in calls]


def judge(row: Row, refiner: Refiner | None = None) -> Verdict:
    """Reads ``row`` the way a user's pipeline does and says whether it was read as the model meant it."""
    refiner = refiner or Refiner()
    detected = formats.detect_format(row.text)
    res = refiner.refine(row.request())
    got = [{"name": c["name"], "arguments": c["arguments"]} for c in res["calls"]]
    reported = any(d["code"] == "format" for d in res["upstream_diagnostics"])
    why = []
    if _key(got) != _key(row.calls):
        why.append(f"calls {got!r} != {row.calls!r}")
    if row.kind in READ_AS_MEANT and detected != row.format and not formats.get(row.format).detection.by_name:
        why.append(f"detected {detected!r}, not {row.format!r}")
    if row.kind == "broken" and not reported:
        why.append("a broken text was not reported")
    return Verdict(row, not why, detected, got, res["stage"], reported, why)


def expected_calls(row: Row) -> list[ToolCall]:
    return [ToolCall(c["name"], c.get("arguments") or {}) for c in row.calls]
