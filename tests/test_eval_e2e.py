"""Every benchmark end to end on a small slice: scripted upstream file (gold + rule corruption) → tier-1 refiner →
results folder; the upstream endpoint cache; the CLI; and (slow) a tiny Qwen3 refiner through vLLM on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from refiner import formats
from refiner.eval import upstream as up
from refiner.eval.common import write_jsonl
from refiner.eval.runner import evaluate, make_benchmark, run_eval
from refiner.pipeline import Refiner

NEEDS = {"apibank": ("apibank",), "nestful": ("nestful",), "bamboogle": ("xlam", "toolace", "anthropic"),
         "bfcl": ("toolace",)}
LIMITS = {"apibank": 9, "nestful": 8, "bamboogle": 9, "bfcl": 8}


def test_every_benchmark_format_is_registered():
    """The formats the benchmarks answer in are part of the registry: a dropped one fails here, not as a skip."""
    for bench, names in NEEDS.items():
        for name in names:
            assert formats.get(name).name == name, bench


def write_outputs_file(path, outputs):
    """``{sample id: output}`` as the upstream JSONL file ``--upstream-file`` reads."""
    write_jsonl(path, ({"id": sid, "output": text} for sid, text in outputs.items()))
    return path


def load(bench: str, limit: int | None = None):
    try:
        b = make_benchmark(bench)
        return b, b.load(limit or LIMITS[bench])
    except FileNotFoundError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("bench", ["apibank", "nestful", "bamboogle", "bfcl"])
def test_gold_upstream_scores_full_marks(bench):
    """The gold rendered in the benchmark's format is strictly valid and scores 1 on every metric, raw and after
    tier 1 (which must leave a correct answer correct)."""
    b, samples = load(bench)
    outputs = up.scripted_outputs(b, samples, corrupt_ratio=0.0)
    res = evaluate(b, samples, outputs, Refiner(engine=None), progress=False)
    for m in b.metrics:
        assert res.raw["overall"][m] == 1.0, (m, [r for r in res.rows if r["raw"][m] != 1.0][:2])
        assert res.refined["overall"][m] == 1.0, (m, [r for r in res.rows if r["scores"][m] != 1.0][:2])


@pytest.mark.parametrize("bench", ["apibank", "nestful", "bamboogle", "bfcl"])
def test_scripted_file_tier1_end_to_end(bench, tmp_path):
    b, samples = load(bench)
    outputs = up.scripted_outputs(b, samples, corrupt_ratio=0.7, seed=1)
    path = write_outputs_file(tmp_path / "upstream.jsonl", outputs)
    report = run_eval([bench], tmp_path / "out", refiner=Refiner(engine=None), upstream_file=path,
                      limit=LIMITS[bench], seed=0, meta={"upstream": "scripted"}, progress=False)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    s = summary["benchmarks"][bench]
    head = b.metrics[0]
    assert s["raw"]["overall"]["n"] == len(samples)
    assert s["raw"]["overall"][head] < 1.0  # the corruption hurts
    assert s["refined"]["overall"][head] >= s["raw"]["overall"][head] - 1e-9  # tier 1 + guard never makes it worse
    rows = [json.loads(x) for x in (tmp_path / "out" / bench / "outputs.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [s.id for s in samples]
    assert all(r["upstream"] == outputs[r["id"]] and "refined" in r and "stage" in r for r in rows)
    text = report.read_text()
    assert "(Raw)" in text and "(w/ Refiner)" in text and "Δ" in text
    assert (tmp_path / "out" / "chart.png").stat().st_size > 1000


@pytest.fixture
def recovery_data():
    """The recovery benchmark's sources (API-Bank from ../shared/data, BFCL from its wheel), or a skip."""
    load("apibank", 1)
    load("bfcl", 1)


def test_recovery_tier1(tmp_path, recovery_data):
    report = run_eval(["recovery"], tmp_path, refiner=Refiner(engine=None), limit=24, recovery_sources=["apibank",
                      "bfcl"], clean_ratio=0.2, progress=False, chart=False)
    table = json.loads((tmp_path / "summary.json").read_text())["recovery"]["off"]
    assert "clean" in table and table["clean"]["n"] > 0
    assert table["clean"]["kept"] + table["clean"]["harmed"] == table["clean"]["n"]
    corrupted = [c for c in table if c not in ("clean", "all")]
    assert len(corrupted) >= 6  # classes are dealt round-robin
    for c in corrupted:
        assert table[c]["fixed"] + table[c]["still_wrong"] == table[c]["n"]
    assert table["all"]["n"] == 48
    assert table["all"]["fixed"] > 0  # tier 1 repairs some errors (e.g. a tool-name typo)
    assert "## Corruption recovery" in report.read_text()


def test_recovery_under_both_spec_policies(tmp_path, recovery_data):
    """The same corrupted inputs refined by tier 1 with trust_spec off and on: trusting the spec fixes more of the
    errors a schema reveals (an undeclared parameter, a value of the wrong type), and the report shows both."""
    report = run_eval(["recovery"], tmp_path, refiner=Refiner(engine=None), limit=24,
                      recovery_sources=["apibank", "bfcl"], clean_ratio=0.2, recovery_trust_spec=(False, True),
                      progress=False, chart=False)
    rec = json.loads((tmp_path / "summary.json").read_text())["recovery"]
    off, on = rec["off"], rec["on"]
    assert {c: t["n"] for c, t in off.items()} == {c: t["n"] for c, t in on.items()}  # same inputs
    assert on["all"]["fixed"] > off["all"]["fixed"]
    assert on["extra_param"]["fixed"] > off["extra_param"]["fixed"]
    rows = [json.loads(x) for x in (tmp_path / "recovery" / "outputs.jsonl").read_text().splitlines()]
    assert sorted({r["trust_spec"] for r in rows}) == ["off", "on"] and len(rows) == 2 * off["all"]["n"]
    text = report.read_text()
    assert "fixed (trust_spec off)" in text and "fixed (trust_spec on)" in text


def test_cli_trust_spec_reaches_the_refiner(tmp_path, recovery_data):
    from typer.testing import CliRunner

    from refiner.cli import app

    base = ["eval", "--bench", "recovery", "--recovery-sources", "apibank,bfcl", "--limit", "12", "--quiet",
            "--no-chart"]
    res = CliRunner().invoke(app, [*base, "--trust-spec", "--out", str(tmp_path / "on")])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "on" / "summary.json").read_text())
    # the table's key is read back from the Refiner that ran
    assert list(summary["recovery"]) == ["on"] and summary["meta"]["trust_spec"] == "on"
    res = CliRunner().invoke(app, [*base, "--compare-trust-spec", "--out", str(tmp_path / "both")])
    assert res.exit_code == 0, res.output
    assert list(json.loads((tmp_path / "both" / "summary.json").read_text())["recovery"]) == ["off", "on"]
    assert "fixed % (trust_spec on)" in res.output


class CountingEngine:
    """Stands in for the OpenAI engine: answers every conversation with a fixed text and counts calls."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    def chat(self, conversations, *, n=1, temperature=0.0, max_tokens=1024, enable_thinking=None, seed=None):
        self.calls += len(conversations)
        return [[self.text] for _ in conversations]


class ContextLimitEngine:
    """Stands in for a model engine with a context limit: a batch holding a prompt longer than ``limit`` characters
    fails as a whole (as vLLM's prompt validation does); otherwise every conversation gets ``answer``."""

    def __init__(self, limit: int, answer: str = "no calls") -> None:
        self.limit = limit
        self.answer = answer
        self.batches = 0

    def chat(self, conversations, *, n=1, temperature=0.0, max_tokens=1024, enable_thinking=None, seed=None):
        self.batches += 1
        for conv in conversations:
            size = sum(len(m["content"]) for m in conv)
            if size > self.limit:
                raise ValueError(f"prompt of {size} characters exceeds the context ({self.limit})")
        return [[self.answer] * n for _ in conversations]


def test_a_refiner_failure_costs_only_its_samples():
    from refiner.pipeline import model_messages, prepare

    b, samples = load("apibank", 9)
    outputs = up.scripted_outputs(b, samples, corrupt_ratio=1.0, seed=4)
    sizes = {s.id: sum(len(m["content"]) for m in model_messages(prepare(s.refine_request(outputs[s.id]), None)))
             for s in samples}
    longest = max(sizes, key=sizes.get)
    limit = max(v for k, v in sizes.items() if k != longest)  # only the longest prompt is too long
    engine = ContextLimitEngine(limit)
    res = evaluate(b, samples, outputs, Refiner(engine=engine, bypass=False), progress=False)
    errors = {r["id"]: r for r in res.rows if r["stage"] == "error"}
    assert list(errors) == [longest]
    assert "exceeds the context" in errors[longest]["error"] and errors[longest]["refined"] == outputs[longest]
    assert errors[longest]["scores"] == errors[longest]["raw"]
    assert engine.batches == 1 + len(samples)  # the batch, then one request at a time
    from refiner.eval.report import bench_section

    assert f"Not refined (1, upstream kept and scored as refined): {longest}" in bench_section(res, "u", "r")
    with pytest.raises(RuntimeError, match="failed on every sample"):
        evaluate(b, samples, outputs, Refiner(engine=ContextLimitEngine(0), bypass=False), progress=False)


def test_endpoint_upstream_is_cached(tmp_path):
    b, samples = load("apibank", 6)
    eng = CountingEngine('<tool_call>\n{"name": "X", "parameters": {}}\n</tool_call>')
    cache = tmp_path / "cache.jsonl"
    first = up.endpoint_outputs(samples, "http://unused", "m", cache, engine=eng)
    assert eng.calls == len(samples) and len(cache.read_text().splitlines()) == len(samples)
    again = up.endpoint_outputs(samples, "http://unused", "m", cache, engine=eng)
    assert again == first and eng.calls == len(samples)  # the rerun cost nothing
    other = up.endpoint_outputs(samples[:2], "http://unused", "m2", cache, engine=eng)  # another model: new calls
    assert eng.calls == len(samples) + 2 and set(other) == {s.id for s in samples[:2]}


def test_cli_served_upstream_over_http_then_refined_from_the_cache(tmp_path):
    """The documented two-step story against a real HTTP endpoint (the scripted OpenAI-compatible fake, which answers
    "echo: <last user message>"): raw only, then refined with the first run's cache, which sends nothing again."""
    pytest.importorskip("fastapi")
    from fake_upstream import MODEL_ID, create_fake_upstream, serve_in_thread
    from typer.testing import CliRunner

    from refiner.cli import app

    _, samples = load("apibank", 6)
    fake = create_fake_upstream()
    with serve_in_thread(fake) as url:
        common = ["eval", "--bench", "apibank", "--limit", "6", "--upstream-base-url", f"{url}/v1",
                  "--upstream-model", MODEL_ID, "--upstream-max-tokens", "64", "--quiet", "--no-chart"]
        res = CliRunner().invoke(app, [*common, "--refiner", "none", "--out", str(tmp_path / "raw")])
        assert res.exit_code == 0, res.output
        assert fake.state.requests == len(samples)
        body = fake.state.bodies[-1]
        assert body["model"] == MODEL_ID and body["max_tokens"] == 64 and body["temperature"] == 0.0
        assert body["messages"] in [s.messages for s in samples] and "tools" not in body
        cache = tmp_path / "raw" / "upstream_cache.jsonl"
        assert len(cache.read_text().splitlines()) == len(samples)
        res = CliRunner().invoke(app, [*common, "--cache-file", str(cache), "--out", str(tmp_path / "refined")])
        assert res.exit_code == 0, res.output
        assert fake.state.requests == len(samples)  # every answer came from the cache
    raw = json.loads((tmp_path / "raw" / "summary.json").read_text())["benchmarks"]["apibank"]
    both = json.loads((tmp_path / "refined" / "summary.json").read_text())["benchmarks"]["apibank"]
    assert raw["refined"] is None and both["raw"] == raw["raw"] and both["refined"]["overall"]["n"] == len(samples)
    rows = [json.loads(x) for x in (tmp_path / "refined" / "apibank" / "outputs.jsonl").read_text().splitlines()]
    assert all(r["upstream"].startswith("echo: ") for r in rows)
    assert f"{MODEL_ID} (Raw)" in res.output and f"{MODEL_ID} (w/ Refiner tier 1)" in res.output


def test_upstream_file_errors_name_file_and_record(tmp_path):
    _, samples = load("apibank", 3)
    p = tmp_path / "u.jsonl"
    p.write_text(json.dumps({"id": samples[0].id, "output": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"u\.jsonl: no output for 2 sample"):
        up.read_outputs_file(p, samples)
    p.write_text(json.dumps({"id": samples[0].id}) + "\n")
    with pytest.raises(ValueError, match=r"u\.jsonl: record 1 .*field 'output'"):
        up.read_outputs_file(p, samples)


def test_cli_eval_apibank(tmp_path):
    from typer.testing import CliRunner

    from refiner.cli import app

    b, samples = load("apibank", 6)
    path = write_outputs_file(tmp_path / "u.jsonl", up.scripted_outputs(b, samples, 0.5, seed=3))
    res = CliRunner().invoke(app, ["eval", "--bench", "apibank", "--upstream-file", str(path), "--limit", "6",
                                   "--out", str(tmp_path / "o"), "--quiet", "--no-chart"])
    assert res.exit_code == 0, res.output
    assert "API-Bank (Table 1)" in res.output and "level-1" in res.output
    res = CliRunner().invoke(app, ["eval", "--bench", "nope", "--upstream-file", str(path), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "unknown benchmark" in res.output


def test_cli_argument_errors_come_before_any_model_load(tmp_path):
    from typer.testing import CliRunner

    from refiner.cli import app

    run = lambda *args: CliRunner().invoke(app, ["eval", "--out", str(tmp_path), *args])  # noqa: E731
    res = run("--bench", "apibank", "--model", str(tmp_path / "no-model"), "--engine", "hf")
    assert res.exit_code == 2 and "exactly one upstream" in res.output  # checked before the model path
    res = run("--bench", "apibank", "--upstream-scripted", "0.5", "--model", str(tmp_path / "no-model"),
              "--engine", "hf")
    assert res.exit_code == 2 and "refiner could not be set up" in res.output and "no-model" in res.output
    res = run("--upstream-base-url", "http://127.0.0.1:1/v1")
    assert res.exit_code == 2 and "--upstream-model" in res.output
    res = run("--upstream-scripted", "0.5", "--engine", "openai", "--model", "m")
    assert res.exit_code == 2 and "--refiner-base-url" in res.output


@pytest.mark.slow
@pytest.mark.vllm
def test_cli_eval_with_a_tiny_qwen_refiner_through_vllm(tmp_path, request):
    """``tool-refiner eval`` as a user runs it, with a refiner model: the tiny random Qwen3 through vLLM on CPU (in its
    own process, as vLLM binds CPU threads), every benchmark plus recovery under both spec policies, 4 samples each.

    The model writes nonsense, so what is checked is the plumbing: every sample reaches the model (``--always-model``)
    and comes back scored; the never-worse guard keeps the refined scores at least as good as the raw ones; and the
    one NESTFUL prompt longer than the model's 4096-token context becomes an error row (upstream kept) instead of
    stopping the run."""
    pytest.importorskip("vllm")
    try:
        make_benchmark("bfcl").load(1)
        make_benchmark("nestful").load(1)
    except FileNotFoundError as e:
        pytest.skip(str(e))
    model = request.getfixturevalue("tiny_qwen3_dir")
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", "from refiner.cli import app; app()", "eval",
           "--bench", "apibank,nestful,bamboogle,bfcl,recovery", "--upstream-scripted", "1.0", "--limit", "4",
           "--model", str(model), "--engine", "vllm", "--engine-arg", "in_process=true", "--engine-arg",
           "dtype=float32", "--engine-arg", "cpu_kvcache_gib=1", "--engine-arg", "use_tqdm=false",
           "--max-tokens", "16", "--always-model", "--compare-trust-spec", "--out", str(out), "--quiet"]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    report = (out / "report.md").read_text()
    assert f"Refiner {model}" in report and "trust_spec off" in report and "trust_spec on" in report
    errors = []
    for bench in NEEDS:
        b = make_benchmark(bench)
        s = summary["benchmarks"][bench]
        head = b.metrics[0]
        assert s["refined"]["overall"]["n"] == s["raw"]["overall"]["n"] > 0
        assert s["refined"]["overall"][head] >= s["raw"]["overall"][head] - 1e-9, bench
        rows = [json.loads(x) for x in (out / bench / "outputs.jsonl").read_text().splitlines()]
        assert {r["stage"] for r in rows} <= {"model", "fallback", "unchanged", "error"}, bench
        assert any(r["stage"] != "error" for r in rows)
        for r in rows:
            if r["stage"] == "error":
                errors.append(r["id"])
                assert "maximum context length" in r["error"] and r["refined"] == r["upstream"]
                assert r["scores"] == r["raw"]
    assert errors and all(e.startswith("nestful-") for e in errors)  # NESTFUL's long in-context prompts
    assert "Not refined (" in report
    rec = summary["recovery"]
    assert set(rec) == {"off", "on"}
    assert {c: t["n"] for c, t in rec["off"].items()} == {c: t["n"] for c, t in rec["on"].items()}
    assert rec["off"]["all"]["n"] >= 12
    assert (out / "chart.png").stat().st_size > 1000


def test_nestful_gold_scores_full_marks_raw():
    """The raw side of the check above, which must hold whatever tier 1 does."""
    b, samples = load("nestful")
    res = evaluate(b, samples, up.scripted_outputs(b, samples, corrupt_ratio=0.0), None, progress=False)
    assert all(res.raw["overall"][m] == 1.0 for m in b.metrics)


def test_bamboogle_prompts_show_the_answer_format_example():
    """Each sample's prompt and format hint show the example of its output format, not an object's repr."""
    from refiner.eval.bamboogle import OUTPUT_FORMATS

    _, samples = load("bamboogle")
    for s in samples:
        example = OUTPUT_FORMATS[s.meta["output_format"]]
        assert s.system.endswith(example) and s.meta["format_hint"].endswith(example), s.id
