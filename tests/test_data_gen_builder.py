"""Builder: the smoke mix from real local sources; every row agrees with the reward; verl loads the parquet; the
CLI builds and reports; unavailable sources are named; LLM corruption resumes after an interruption."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, qwen_tokenizer_dir, shared_path

from data_gen.builder import build
from data_gen.config import load_config, type_counts
from data_gen.sources import SourceUnavailable
from refiner import formats

SMOKE = ROOT / "configs" / "data" / "smoke.yaml"


def _local_cfg(**over):
    glaive = {"path": str(shared_path("glaive_demo")), "limit": 40}
    sources = {"glaive": glaive, "nestools": {"path": str(shared_path("nestools", "test_data.jsonl")), "limit": 40}}
    return load_config(SMOKE, sources=sources, **over)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    cfg = _local_cfg()
    report = build(cfg, out, progress=False)
    return cfg, out, report


def _rows(out: Path):
    import pandas as pd

    return [r for split in ("train", "validation") for r in pd.read_parquet(out / f"{split}.parquet").to_dict("records")]


def test_mix_matches_config(built):
    cfg, out, report = built
    rows = _rows(out)
    want = type_counts(cfg)
    got = Counter(r["extra_info"]["data_type"] for r in rows)
    assert got == Counter(want)
    assert report.rows["validation"] == round(6 * 0.2) * 3 + round(want["erroneous"] * 0.2)
    for split in ("train", "validation"):
        idx = sorted(r["extra_info"]["index"] for r in rows if r["extra_info"]["split"] == split)
        assert idx == list(range(report.rows[split]))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows"] == report.rows and manifest["skipped_records"]


def test_every_row_agrees_with_the_reward(built):
    from rewards import compute_score

    _, out, _ = built
    for r in _rows(out):
        gt = r["reward_model"]["ground_truth"]
        assert r["reward_model"]["style"] == "rule"
        g = json.loads(gt)
        assert set(g) == {"format", "answer", "order_sensitive"}
        assert compute_score(r["data_source"], g["answer"], gt)["score"] == 1.0
        info = r["extra_info"]
        up = compute_score(r["data_source"], info["upstream"], gt, dict(info))["score"]
        if info["label"] == "correct":
            assert up == 1.0 and list(info["error_classes"]) == []
        else:
            assert up < 1.0 and len(info["error_classes"]) >= 1
        assert info["upstream"] in r["prompt"][1]["content"]


def test_shuffled_rows_are_order_errors(built):
    from refiner.calls import calls_equal

    _, out, _ = built
    seen = Counter()
    for r in _rows(out):
        info = r["extra_info"]
        if info["data_type"].startswith("shuffled"):
            g = json.loads(r["reward_model"]["ground_truth"])
            fmt = "order" if info["data_type"] == "shuffled_simplified" else "nestools"
            assert g["format"] == fmt and g["order_sensitive"]
            f = formats.get(fmt)
            up, gold = f.parse_strict(info["upstream"]), f.parse_strict(g["answer"])
            assert sorted(c.name for c in up) == sorted(c.name for c in gold)
            if fmt == "nestools":
                assert calls_equal(up, gold, ordered=False) and not calls_equal(up, gold, ordered=True)
            seen[fmt] += 1
    assert seen == {"nestools": 6, "order": 6}


@pytest.mark.slow
@pytest.mark.verl
def test_verl_rlhf_dataset_loads_and_templates(built):
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    _, out, report = built
    tok = AutoTokenizer.from_pretrained(str(qwen_tokenizer_dir()))
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 4096, "filter_overlong_prompts": True,
                            "filter_overlong_prompts_workers": 1, "truncation": "error",
                            "cache_dir": str(out / "verl_cache")})
    ds = RLHFDataset(str(out / "train.parquet"), tok, cfg)
    assert len(ds) == report.rows["train"]  # nothing filtered as over-long after the chat template
    item = ds[0]
    text = tok.apply_chat_template(item["raw_prompt"], add_generation_prompt=True, tokenize=False)
    assert "<|im_start|>user" in text and item["extra_info"]["upstream"] in text
    assert json.loads(item["reward_model"]["ground_truth"])["format"]


def test_cli_build_and_stats(tmp_path):
    from typer.testing import CliRunner

    from refiner.cli import app

    out = tmp_path / "cli"
    args = ["data", "build", "--config", str(SMOKE), "--out", str(out), "-q",
            "--source-path", f"nestools={shared_path('nestools', 'test_data.jsonl')}",
            "--source-path", f"glaive={shared_path('glaive_demo')}"]
    res = CliRunner().invoke(app, args + ["--reward-variant", "strict"])
    assert res.exit_code == 0, res.output
    assert (out / "train.parquet").exists() and '"train"' in res.output
    # the build output says per source what was read, kept and skipped why
    assert re.search(r"glaive: read \d+ records from \S*glaive_demo, kept 40", res.output), res.output
    assert "no tools (a plain chat record)" in res.output
    assert json.loads((out / "manifest.json").read_text())["config"]["reward_variant"] == "strict"
    bad = CliRunner().invoke(app, args + ["--reward-variant", "loose"])
    assert bad.exit_code == 2 and "reward_variant must be one of" in bad.output
    res = CliRunner().invoke(app, ["data", "stats", str(out), "--tokenizer", str(qwen_tokenizer_dir()),
                                   "--max-prompt-length", "300"])
    assert res.exit_code == 0, res.output
    assert "data_type" in res.output and "tokens" in res.output and "warning:" in res.output


def test_paper_config_offline_names_missing_sources(tmp_path, monkeypatch):
    from data_gen.sources import base

    monkeypatch.setattr(base, "hub_reachable", lambda timeout=3.0: False)
    cfg = load_config(ROOT / "configs" / "data" / "paper.yaml")
    with pytest.raises(SourceUnavailable) as e:
        build(cfg, tmp_path, progress=False)
    msg = str(e.value)
    assert "toolace" in msg and "xlam" in msg and "local.yaml" in msg and "--source-path" in msg


def test_substitute_keeps_the_total(tmp_path, monkeypatch):
    from data_gen.sources import base

    monkeypatch.setattr(base, "hub_reachable", lambda timeout=3.0: False)
    cfg = _local_cfg(missing_sources="substitute")
    cfg["types"]["correct"]["sources"] = ["glaive", "toolace", "xlam"]
    report = build(cfg, tmp_path, progress=False)
    assert report.counts[("correct", "glaive")] == 18
    assert set(report.unavailable) == {"toolace", "xlam"} and report.substitutions


class _ScriptedEngine:
    """Deterministic 'model': swaps the first two characters of the original answer; can fail after k batches."""

    def __init__(self, fail_after: int | None = None):
        self.fail_after, self.batches, self.prompts = fail_after, 0, 0

    def chat(self, conversations, *, n=1, temperature=0.0, max_tokens=1024, enable_thinking=None, seed=None):
        if self.fail_after is not None and self.batches >= self.fail_after:
            raise KeyboardInterrupt("killed")
        self.batches += 1
        self.prompts += len(conversations)
        outs = []
        for conv in conversations:
            original = conv[-1]["content"].split("Original answer:\n", 1)[1].split("\n\nReply with", 1)[0]
            outs.append(["<think>ok</think>" + original.replace('"', "'", 1)])
        return outs


def test_llm_corruption_resumes_after_interrupt(tmp_path):
    cfg = _local_cfg(corruptor="llm")
    cfg["llm"]["batch_size"] = 4
    cache = tmp_path / "cache.jsonl"
    cfg["llm"]["cache"] = str(cache)
    first = _ScriptedEngine(fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        build(cfg, tmp_path / "a", engine_factory=lambda model: first, progress=False)
    done = len(cache.read_text().splitlines())
    assert done == 8
    with cache.open("a") as fh:
        fh.write('{"key": "torn')  # a write cut by the kill
    second = _ScriptedEngine()
    report = build(cfg, tmp_path / "a", engine_factory=lambda model: second, progress=False)
    n_llm = sum(n for (t, _), n in type_counts_items(cfg))
    assert report.llm["from_cache"] == 8 and second.prompts == n_llm - 8
    keys = [json.loads(x)["key"] for x in cache.read_text().splitlines() if x.endswith("}")]
    assert len(keys) == len(set(keys)) == n_llm
    fresh = _ScriptedEngine()
    cfg2 = json.loads(json.dumps(cfg))
    cfg2["llm"]["cache"] = str(tmp_path / "cache2.jsonl")
    build(cfg2, tmp_path / "b", engine_factory=lambda model: fresh, progress=False)
    def dump(rows):
        return [json.dumps(r, default=lambda a: a.tolist(), sort_keys=True) for r in rows]

    assert dump(_rows(tmp_path / "a")) == dump(_rows(tmp_path / "b"))  # resumed == uninterrupted
    labels = Counter(r["extra_info"]["label"] for r in _rows(tmp_path / "a"))
    assert labels["corrupted"] > 0


def type_counts_items(cfg):
    return [((t, None), n) for t, n in type_counts(cfg).items() if t != "correct"]


def _content_only_cfg(variant):
    cfg = _local_cfg(reward_variant=variant)
    cfg["types"] = {"erroneous": {"sources": ["glaive"], "error_types": ["content"], "models": ["a", "b", "c"],
                                  "per_source": 8}}
    return cfg


@pytest.fixture(scope="module")
def variant_builds(tmp_path_factory):
    out = {}
    for variant in ("paper", "strict"):
        d = tmp_path_factory.mktemp(f"variant_{variant}")
        out[variant] = (build(_content_only_cfg(variant), d, progress=False), _rows(d))
    return out


def test_paper_variant_rejects_extra_param_rows(variant_builds):
    from rewards import compute_score

    report, rows = variant_builds["paper"]
    assert len(rows) == 24 and report.rejected["corrupted upstream scores 1.0"] > 0
    assert not any("extra_param" in r["extra_info"]["error_classes"] for r in rows)
    for r in rows:
        assert r["extra_info"]["reward_variant"] == "paper"
        gt = r["reward_model"]["ground_truth"]
        assert compute_score(r["data_source"], r["extra_info"]["upstream"], gt, variant="paper")["score"] < 1.0


def test_strict_variant_keeps_extra_param_rows(variant_builds):
    from rewards import compute_score

    report, rows = variant_builds["strict"]
    assert len(rows) == 24 and report.rejected["corrupted upstream scores 1.0"] == 0
    extra = [r for r in rows if "extra_param" in r["extra_info"]["error_classes"]]
    assert extra
    for r in rows:
        info, gt = r["extra_info"], r["reward_model"]["ground_truth"]
        assert info["reward_variant"] == "strict"
        assert compute_score(r["data_source"], info["upstream"], gt, dict(info))["score"] < 1.0  # variant from row
        assert compute_score(r["data_source"], json.loads(gt)["answer"], gt, dict(info))["score"] == 1.0
    # the paper reward cannot see these errors: exactly what the strict build keeps
    assert all(compute_score(r["data_source"], r["extra_info"]["upstream"], r["reward_model"]["ground_truth"],
                             variant="paper")["score"] == 1.0 for r in extra)
    manifest = json.loads((report.out_dir / "manifest.json").read_text())
    assert manifest["config"]["reward_variant"] == "strict"


def test_reward_variant_is_checked(tmp_path):
    with pytest.raises(ValueError, match="reward_variant must be one of paper, strict"):
        load_config(SMOKE, reward_variant="lenient")
    bad = tmp_path / "bad.yaml"
    bad.write_text("reward_variant: nope\n")
    with pytest.raises(ValueError, match="nope"):
        load_config(bad)


def test_builder_counts_not_applicable_corruptions(tmp_path, monkeypatch):
    """A CorruptionError (no class applies to the drawn sample) is counted and another sample is drawn."""
    from data_gen import builder
    from data_gen.corrupt.rules import CorruptionError

    real, calls = builder.corrupt, {"n": 0}

    def flaky(*a, **kw):
        calls["n"] += 1
        if calls["n"] <= 3:
            raise CorruptionError("none of the error classes applies (test)")
        return real(*a, **kw)

    monkeypatch.setattr(builder, "corrupt", flaky)
    report = build(_content_only_cfg("paper"), tmp_path, progress=False)
    assert report.rejected["no applicable corruption; another sample drawn"] == 3
    assert sum(report.rows.values()) == 24


def test_vllm_cpu_seeded_chunked_prefill_failure_is_explained(tmp_path):
    """vLLM 0.32's CPU sampler cannot split a seeded prompt over steps; the corruptor says what to change, and the
    batches finished before the failure stay cached."""
    from data_gen.corrupt.llm import LLMCorruptor

    class CpuSeedFailure(_ScriptedEngine):
        def chat(self, conversations, **kw):
            if self.batches >= 1:
                raise RuntimeError("CPU Generator does not use offset")
            return super().chat(conversations, **kw)

    c = LLMCorruptor(lambda m: CpuSeedFailure(), tmp_path / "c.jsonl", batch_size=2, progress=False)
    reqs = [(f"s{i}", "m", "name", f'{{"name": "f{i}", "arguments": {{}}}}') for i in range(5)]
    with pytest.raises(RuntimeError, match="max_num_batched_tokens.*llm.batch_size"):
        c.run(reqs)
    assert len((tmp_path / "c.jsonl").read_text().splitlines()) == 2


def test_training_prompt_is_the_inference_prompt(built):
    """A row's prompt is exactly what the inference pipeline sends the model for the same task and upstream, so the
    refiner is served the prompt it was trained on."""
    from refiner.pipeline import model_messages, prepare

    _, out, _ = built
    rows = _rows(out)
    checked = Counter()
    for row in rows:
        info = row["extra_info"]
        if "<think>" in info["upstream"]:
            continue  # the pipeline moves upstream reasoning into its own block; the builder writes none
        user = row["prompt"][1]["content"]
        system_part = user.split("<<<SYSTEM\n", 1)[1].split("\nSYSTEM>>>", 1)[0]
        query_part = user.split("<<<QUERY\n", 1)[1].split("\nQUERY>>>", 1)[0]
        request = {"system": system_part, "query": query_part, "upstream": info["upstream"], "format": info["format"]}
        job = prepare(request, None)
        if job.out_fmt != info["format"]:
            continue
        assert [dict(m) for m in row["prompt"]] == model_messages(job), info["record_id"]
        checked[info["format"]] += 1
    assert sum(checked.values()) >= len(rows) // 2, checked
