"""The per-family corpus of raw model outputs (``tests/corpus/families/*.jsonl``, see its README) and how the
library's reading of one row is judged. Used by ``tests/test_family_corpus.py``.

Rows are in canitoolcall's fixture layout (one raw output, the tools offered, the expected parse or the accepted
failure outcomes, provenance, tags); ``families.json`` holds each family's markers in canitoolcall's ``family.json``
shape. A row is read through the public path a user takes, ``Refiner().refine({"upstream": raw, "tools": tools})``
with the format auto-detected (``finish_reason: "length"`` for rows tagged ``truncated``, as canitoolcall's adapters
replay them), and judged by canitoolcall's own checks (``canitoolcall.checks.run_checks`` on the non-streaming parse).

When the pipeline's result carries no ``content`` / ``reasoning_content``, only the calls are judged: the row's
expected text fields are set aside (``calls_only``), and said so in the verdict; when it carries them, the whole parse
is judged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from corpus_rows import read_rows

from refiner.pipeline import Refiner

CORPUS_DIR = Path(__file__).resolve().parent / "corpus" / "families"
KINDS = ("template_render", "engine_test", "bug_report", "hand")
REQUIRED = (("id", str), ("family", str), ("models", list), ("provenance", dict), ("tools", list),
            ("raw_output", str), ("tags", list))


@dataclass(frozen=True)
class Row:
    where: str  # file:line
    record: dict

    @property
    def family(self) -> str:
        return self.record["family"]

    @property
    def id(self) -> str:
        return self.record["id"]

    @property
    def truncated(self) -> bool:
        return "truncated" in self.record["tags"]

    @property
    def expects_no_call(self) -> bool:
        exp = self.record.get("expected")
        return exp is None or not exp["tool_calls"]

    @property
    def prose_only(self) -> bool:
        """An answer that only talks: no call markers at all, nothing broken."""
        tags = self.record["tags"]
        return "no-call" in tags and not {"malformed", "truncated"} & set(tags)

    def request(self) -> dict:
        req: dict[str, Any] = {"upstream": self.record["raw_output"], "tools": self.record["tools"]}
        if self.truncated:
            req["finish_reason"] = "length"
        return req


@dataclass
class Verdict:
    row: Row
    passed: bool
    calls: list[dict]
    calls_only: bool  # the pipeline gave no content / reasoning_content, so only the calls were judged
    detail: str
    stage: str


def load(directory: Path = CORPUS_DIR) -> list[Row]:
    """Every row of every family file; a malformed row raises ``ValueError`` naming its file, line and field."""
    rows = []
    seen: set[str] = set()
    families = load_families(directory)
    for where, rec in read_rows(directory, REQUIRED, None):
        stem = where.rsplit(".jsonl:", 1)[0]
        if ("expected" in rec) == ("expected_error" in rec):
            raise ValueError(f"{where}: a row has exactly one of 'expected' and 'expected_error'")
        if rec["provenance"].get("kind") not in KINDS:
            raise ValueError(f"{where}: provenance.kind must be one of {KINDS}")
        if not str(rec["provenance"].get("source_url", "")).startswith("http"):
            raise ValueError(f"{where}: provenance.source_url must be a URL")
        if rec["family"] != stem or not rec["id"].startswith(rec["family"] + "/"):
            raise ValueError(f"{where}: family {rec['family']!r} must name the file and prefix the id")
        if rec["family"] not in families:
            raise ValueError(f"{where}: family {rec['family']!r} is not in families.json")
        if rec["id"] in seen:
            raise ValueError(f"{where}: duplicate id {rec['id']!r}")
        seen.add(rec["id"])
        rows.append(Row(where, rec))
    return rows


@lru_cache(maxsize=4)
def load_families(directory: Path = CORPUS_DIR) -> dict[str, dict]:
    return json.loads((directory / "families.json").read_text(encoding="utf-8"))


def judge(row: Row, refiner: Refiner | None = None, family: dict | None = None) -> Verdict:
    """Reads ``row`` as a user's pipeline does and judges the result with canitoolcall's checks (imported here:
    callers skip when canitoolcall is not installed). ``family``: the row's family record (canitoolcall's
    ``family.json`` shape; default: this corpus's ``families.json``), so canitoolcall's own fixtures are judged
    the same way."""
    from canitoolcall.checks import case_status, run_checks
    from canitoolcall.fixtures import Family as CFamily
    from canitoolcall.fixtures import Fixture
    from canitoolcall.results import Observation, ParsedToolCall, ParseResult, Status

    refiner = refiner or Refiner()
    res = refiner.refine(row.request())
    calls = [{"name": c["name"], "arguments": c.get("arguments") or {}} for c in res["calls"]]
    calls_only = "content" not in res
    fixture = Fixture.from_dict(row.record)
    if calls_only and fixture.expected is not None:
        fixture = replace(fixture, expected=replace(fixture.expected, content=None, reasoning_content=None))
    got = ParseResult(
        content=None if calls_only else res.get("content"),
        reasoning_content=None if calls_only else res.get("reasoning_content"),
        tool_calls=tuple(ParsedToolCall(c["name"], json.dumps(c["arguments"], ensure_ascii=False)) for c in calls),
    )
    fam = family if family is not None else load_families()[row.family]
    cfamily = CFamily.from_dict({k: v for k, v in fam.items() if k != "sources"})
    results = run_checks(fixture, cfamily, Observation(nonstream=got, streams={}))
    status = case_status(results)
    bad = [f"{r.check}: {r.detail}" for r in results if r.status not in (Status.PASS, Status.SOFT_PASS)]
    return Verdict(row, status in (Status.PASS, Status.SOFT_PASS), calls, calls_only, "; ".join(bad), res["stage"])


def read_rates(verdicts: list[Verdict]) -> dict[str, tuple[int, int]]:
    """family -> (rows passed, rows)."""
    out: dict[str, list[int]] = {}
    for v in verdicts:
        acc = out.setdefault(v.row.family, [0, 0])
        acc[0] += v.passed
        acc[1] += 1
    return {f: (p, n) for f, (p, n) in sorted(out.items())}


def rate_table(rates: dict[str, tuple[int, int]]) -> str:
    lines = ["| family | read | rate |", "|---|---|---|"]
    lines += [f"| {f} | {p}/{n} | {100 * p / n:.0f} % |" for f, (p, n) in rates.items()]
    p = sum(x for x, _ in rates.values())
    n = sum(y for _, y in rates.values())
    lines.append(f"| all | {p}/{n} | {100 * p / max(n, 1):.0f} % |")
    return "\n".join(lines)
