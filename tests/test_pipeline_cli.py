"""``tool-refiner repair`` / ``refine`` on JSONL: one result per line in order, bad lines passed through as errors."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from refiner.cli import app
from refiner.commands.inference import bundled_requests_path

runner = CliRunner()


def test_repair_bundled_examples_prints_a_table():
    res = runner.invoke(app, ["repair"])
    assert res.exit_code == 0, res.output
    n = sum(1 for line in bundled_requests_path().read_text().splitlines() if line.strip())
    assert re.search(rf"requests\s+{n}\n", res.output)
    assert "repaired" in res.output and "gate passes: result" in res.output


def test_repair_trust_spec_option(tmp_path):
    """Line 2 of the bundled set writes days as "3" on an otherwise complete call: left alone by default (the gate
    still reports it), converted with --trust-spec."""
    rows = {}
    for flag in ([], ["--trust-spec"]):
        out = tmp_path / f"out{len(flag)}.jsonl"
        res = runner.invoke(app, ["repair", str(bundled_requests_path()), "-o", str(out), *flag])
        assert res.exit_code == 0, res.output
        rows[bool(flag)] = [json.loads(line) for line in out.read_text().splitlines()]
    assert [d["code"] for d in rows[False][1]["diagnostics"]] == ["type"]
    assert '"days": "3"' in rows[False][1]["refined"]
    assert rows[True][1]["diagnostics"] == [] and rows[True][1]["calls"][0]["arguments"]["days"] == 3


def test_repair_jsonl_in_order_with_bad_lines(tmp_path):
    src = tmp_path / "in.jsonl"
    good = json.loads(bundled_requests_path().read_text().splitlines()[0])
    src.write_text(
        json.dumps(good) + "\n" + "{not json\n" + "\n" + json.dumps({"tools": []}) + "\n" + json.dumps(good) + "\n"
    )
    out = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["repair", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 4, 5]
    assert [r["stage"] for r in rows] == ["repaired", "error", "error", "repaired"]
    assert "in.jsonl:2: not valid JSON" in rows[1]["error"] and rows[1]["input"] == "{not json"
    assert "in.jsonl:4: field 'upstream' is missing" in rows[2]["error"]
    assert rows[0]["refined"] == rows[3]["refined"] and "get_weather" in rows[0]["refined"]


def test_refine_uses_the_engine(tmp_path, monkeypatch):
    from refiner import engines

    class Fixed:
        def chat(self, conversations, *, n=1, **kw):
            return [["<think>ok</think>" + '<tool_call>\n{"name": "search_flights", "arguments": '
                     '{"origin": "Oslo", "destination": "Rome"}}\n</tool_call>'] * n for _ in conversations]

    seen = {}

    def fake_make_engine(kind, **kw):
        seen.update(kind=kind, **kw)
        return Fixed()

    monkeypatch.setattr(engines, "make_engine", fake_make_engine)
    src = tmp_path / "in.jsonl"
    src.write_text(bundled_requests_path().read_text())
    out = tmp_path / "out.jsonl"
    res = runner.invoke(app, ["refine", str(src), "-o", str(out), "--model", "m", "--engine", "openai", "--n", "2"])
    assert res.exit_code == 0, res.output
    assert seen["kind"] == "openai" and seen["model"] == "m"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    last = rows[-1]  # Flights to Rome, origin missing: tier 1 cannot fix it, the model does
    assert last["stage"] == "model" and last["calls"][0]["arguments"]["origin"] == "Oslo"
    tier1 = runner.invoke(app, ["repair", str(src), "-o", str(tmp_path / "t1.jsonl")])
    assert tier1.exit_code == 0, tier1.output
    t1 = [json.loads(line) for line in (tmp_path / "t1.jsonl").read_text().splitlines()]
    still_failing = [i for i, r in enumerate(t1) if any(d["severity"] == "error" for d in r["diagnostics"])]
    asked = [i for i, r in enumerate(rows) if r["stage"] in ("model", "fallback")]
    assert asked == still_failing and len(asked) < len(rows)  # the rest pass after tier 1: bypassed
