"""The ``formats`` and ``convert`` commands, the bundled examples, and the library conversion functions."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from refiner import formats
from refiner.cli import app
from refiner.formats.convert import ConvertError, convert_jsonl, convert_text

runner = CliRunner()
ALL = sorted(formats.names())


def example_text(name: str) -> str:
    """What ``formats --example NAME`` prints."""
    return formats.get(name).example + "\n"


@pytest.mark.parametrize("name", ALL)
def test_bundled_example_is_valid_and_detected(name):
    text = example_text(name)
    calls = formats.get(name).parse_strict(text)
    assert len(calls) >= 2
    assert formats.detect_format(text) == name or formats.get(name).detection.by_name


def test_formats_lists_every_format():
    res = runner.invoke(app, ["formats"])
    assert res.exit_code == 0
    for f in formats.all_formats():
        assert f.name in res.output and f.description in res.output
    rows = json.loads(runner.invoke(app, ["formats", "--json"]).output)
    assert {r["name"]: r["order_sensitive"] for r in rows}["nestful"] is True
    assert runner.invoke(app, ["formats", "--example", "xlam"]).output == example_text("xlam")
    bad = runner.invoke(app, ["formats", "--example", "nope"])
    assert bad.exit_code == 2 and "unknown wire format" in bad.output


@pytest.mark.parametrize("src", ALL)
def test_convert_every_example_to_every_format(src, tmp_path):
    calls = formats.get(src).parse_strict(example_text(src))
    for dst in ALL:
        if dst == "order":
            continue  # order keeps steps only; checked below
        named = ["--from", src] if formats.get(src).detection.by_name else []  # (detection never names it)
        res = runner.invoke(app, ["convert", *named, "--to", dst], input=example_text(src))
        assert res.exit_code == 0, res.output
        got = formats.get(dst).parse_strict(res.stdout)
        assert [(c.name, dict(c.arguments)) for c in got] == [(c.name, dict(c.arguments)) for c in calls]


def test_convert_file_to_output_and_order(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text(example_text("order"), encoding="utf-8")
    out = tmp_path / "out.txt"
    res = runner.invoke(app, ["convert", str(src), "--from", "order", "--to", "order", "-o", str(out)])
    assert res.exit_code == 0
    assert formats.get("order").parse_strict(out.read_text()) == formats.get("order").parse_strict(
        example_text("order")
    )


def test_convert_errors_name_the_input(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text('<func_call>[{"name": "a", "arguments": {"x": 1,}}]</func_call>', encoding="utf-8")
    res = runner.invoke(app, ["convert", str(bad), "--from", "xlam", "--to", "hermes"])
    assert res.exit_code == 2 and f"{bad}:1:48: [xlam] invalid JSON" in res.output
    res = runner.invoke(app, ["convert", str(bad), "--from", "xlam", "--to", "hermes", "--lenient"])
    assert res.exit_code == 0 and formats.get("hermes").parse_strict(res.stdout)
    assert runner.invoke(app, ["convert", str(tmp_path / "missing.txt"), "--to", "xlam"]).exit_code == 2
    res = runner.invoke(app, ["convert", "--to", "xlam"], input="no calls at all")
    assert res.exit_code == 2 and "could not detect" in res.output
    assert runner.invoke(app, ["convert", "--to", "yaml"], input="x").exit_code == 2


def test_convert_jsonl_field(tmp_path, nestful_dir):
    records = json.loads((nestful_dir / "executable" / "executable-data.json").read_text(encoding="utf-8"))[:20]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    res = runner.invoke(
        app,
        [
            "convert",
            str(src),
            "--jsonl",
            "--field",
            "output",
            "--from",
            "nestful",
            "--to",
            "xlam",
            "--out-field",
            "xlam",
            "-o",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 20
    for rec, row in zip(records, rows):
        got = formats.get("xlam").parse_strict(row["xlam"])
        assert [c.name for c in got] == [c["name"] for c in rec["output"]]
        assert row["output"] == rec["output"]  # the source field is kept


def test_convert_jsonl_errors_name_file_line_and_field(tmp_path):
    src = tmp_path / "in.jsonl"
    good = json.dumps({"calls": '<func_call>[{"name": "a", "arguments": {}}]</func_call>'})
    src.write_text(good + "\n" + json.dumps({"other": 1}) + "\n", encoding="utf-8")
    res = runner.invoke(app, ["convert", str(src), "--jsonl", "--field", "calls", "--to", "hermes"])
    assert res.exit_code == 2 and f"{src}:2" in res.output and "'calls'" in res.output
    src.write_text(good + "\n{broken\n", encoding="utf-8")
    res = runner.invoke(app, ["convert", str(src), "--jsonl", "--field", "calls", "--to", "hermes"])
    assert res.exit_code == 2 and f"{src}:2: not a JSON record" in res.output
    bad = json.dumps({"calls": "<func_call>[oops]</func_call>"})
    with pytest.raises(ConvertError, match=r"in\.jsonl:3 field 'calls': \[xlam\]"):
        list(convert_jsonl([good, "", bad], "auto", "hermes", "calls", source="in.jsonl"))


def test_convert_text_lenient_reports_problems():
    done = convert_text('<tool_call>{"name": "a", "arguments": {"x": 1', "auto", "openai", lenient=True)
    assert done.source_format == "hermes" and done.calls == 1 and done.problems
    with pytest.raises(ConvertError):
        convert_text('<tool_call>{"name": "a", "arguments": {"x": 1', "auto", "openai")


def test_readme_lists_every_registered_format():
    """The README's list is the registry's (``tool-refiner formats --markdown``): a new format shows up there or this
    fails."""
    from pathlib import Path

    from refiner.commands.formats import readme_list

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert readme_list() in readme
    assert runner.invoke(app, ["formats", "--markdown"]).output == readme_list()
