"""``tool-refiner eval``: the paper's benchmarks and corruption recovery, for any upstream model, raw vs refined."""

from __future__ import annotations

from pathlib import Path

import typer

from refiner import commands as shared

HELP = """Score an upstream model's tool calls on API-Bank, NESTFUL, Bamboogle*, BFCL (AST) and corruption recovery,
raw and after the refiner (tier 1 by default, or a model), or measure tier 1 per error class and format (--bench
tier1); writes OUT/report.md. Give exactly one upstream: --upstream-base-url with --upstream-model, --upstream-file
or --upstream-scripted (recovery and tier1 need none).

\b
Example (upstream served on :8000, refiner on :8001):
  tool-refiner eval --upstream-base-url http://127.0.0.1:8000/v1 \\
      --upstream-model Qwen/Qwen2.5-7B-Instruct --out results/qwen7b \\
      --refiner-base-url http://127.0.0.1:8001/v1 --model refiner
"""


def register(app: typer.Typer) -> None:
    @app.command("eval", help=HELP)
    def eval_cmd(
        out: Path = typer.Option(..., help="Results folder: report.md, summary.json, chart.png, <bench>/outputs.jsonl, "
                                 "upstream_cache.jsonl."),
        bench: str = typer.Option("apibank,nestful,bamboogle,bfcl", help="Comma-separated: apibank, nestful, "
                                  "bamboogle, bfcl, recovery, tier1 (the tier-1 suite: BFCL's gold in every "
                                  "format, both spec policies, no model)."),
        limit: int | None = typer.Option(None, help="Samples per benchmark, spread over its subsets (default: "
                                            "all); for tier1, BFCL records."),
        upstream_base_url: str | None = typer.Option(None, help="OpenAI-compatible endpoint of the upstream "
                                                        "model, e.g. http://127.0.0.1:8000/v1 (vllm serve)."),
        upstream_model: str | None = typer.Option(None, help="Upstream model name at that endpoint."),
        upstream_file: Path | None = typer.Option(None, help="JSONL of {id, output} upstream outputs."),
        upstream_scripted: float | None = typer.Option(None, help="Script the upstream from the gold answers, "
                                                          "rule-corrupted with this probability (0-1)."),
        upstream_max_tokens: int = typer.Option(1024, help="Upstream generation length."),
        upstream_temperature: float = typer.Option(0.0, help="Upstream sampling temperature."),
        upstream_thinking: bool | None = typer.Option(None, "--upstream-thinking/--upstream-no-thinking",
                                                         help="Upstream reasoning on/off (Qwen3 chat template "
                                                         "enable_thinking; default: the server's)."),
        cache_file: Path | None = typer.Option(None, help="Upstream answer cache (default OUT/upstream_cache"
                                                  ".jsonl); a rerun sends only uncached prompts."),
        refiner: str = typer.Option("tier1", help="tier1 (no model), none (raw scores only) or model (set by "
                                    "--model / --refiner-base-url)."),
        model: str | None = shared.MODEL,
        engine: str | None = shared.ENGINE,
        refiner_base_url: str | None = shared.REFINER_BASE_URL,
        engine_arg: list[str] | None = shared.ENGINE_ARG,
        n: int = shared.N,
        max_tokens: int = shared.MAX_TOKENS,
        thinking: bool | None = shared.THINKING,
        always_model: bool = typer.Option(False, "--always-model", help="Call the refiner model on every sample, "
                                          "also when the upstream already passes the checks."),
        trust_spec: bool = shared.TRUST_SPEC,
        compare_trust_spec: bool = typer.Option(False, "--compare-trust-spec", help="Run corruption recovery "
                                                "under both tier-1 spec policies (trust_spec off and on) and report "
                                                "them side by side."),
        data_dir: Path | None = typer.Option(None, help="Public data folder (default ../shared/data or "
                                                "$TOOL_REFINER_SHARED_DATA)."),
        bfcl_wheel: Path | None = typer.Option(None, help="bfcl-eval wheel (default .cache/bfcl/*.whl)."),
        bfcl_categories: str | None = typer.Option(None, help="Comma-separated BFCL categories (default: the 8 "
                                                      "Python AST ones)."),
        bfcl_format: str = typer.Option("toolace", help="Wire format BFCL answers are parsed in."),
        apibank_adjustments: bool = typer.Option(True, "--apibank-adjustments/--no-apibank-adjustments",
                                                 help="The paper's refiner-side API-Bank adjustments (tool calls "
                                                 "only, numbers as strings)."),
        recovery_sources: str = typer.Option("apibank,nestful,bamboogle,bfcl", help="Sources of gold calls for "
                                             "the recovery benchmark."),
        clean_ratio: float = typer.Option(0.15, help="Share of uncorrupted inputs in recovery (measures harm)."),
        seed: int = typer.Option(0, help="Seed for sampling, in-context examples and corruption."),
        chart: bool = typer.Option(True, "--chart/--no-chart", help="Draw chart.png."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
    ) -> None:
        from refiner.commands.serve import build_refiner, parse_engine_args
        from refiner.engines import EngineError
        from refiner.eval.runner import check_upstream, run_eval

        benches = shared.split_list(bench)
        # argument errors first, before a model is loaded
        if upstream_base_url and not upstream_model:
            raise typer.BadParameter("--upstream-base-url needs --upstream-model")
        with shared.exit_on(ValueError):
            check_upstream(benches, upstream_file, upstream_base_url, upstream_scripted)
        with_model = bool(model or refiner_base_url)
        if refiner not in ("tier1", "none", "model"):
            raise typer.BadParameter(f"--refiner must be tier1, none or model, got {refiner!r}")
        if refiner == "model" and not with_model:
            raise typer.BadParameter("--refiner model needs --model (a path for vllm/hf, or the served name with "
                                     "--refiner-base-url)")
        if with_model and engine == "openai" and not refiner_base_url:
            raise typer.BadParameter("--engine openai needs --refiner-base-url")
        ref = ref_name = None
        if refiner != "none" or with_model:
            set_up = "error: the refiner could not be set up"
            with shared.exit_on(ValueError, FileNotFoundError, EngineError, prefix=set_up):
                ref = build_refiner(model=model, refiner_base_url=refiner_base_url, engine=engine,
                                    engine_kwargs=parse_engine_args(engine_arg),
                                    n=n, thinking=thinking, max_tokens=max_tokens, bypass=not always_model,
                                    trust_spec=trust_spec)
            ref_name = f"Refiner {model or refiner_base_url}" if with_model else "Refiner tier 1"
        upstream_name = upstream_model or (upstream_file.name if upstream_file else None) or (
            f"gold, {upstream_scripted:.0%} rule-corrupted" if upstream_scripted is not None else "upstream")
        meta = {"upstream": upstream_name, "refiner": ref_name or "none", "limit": limit, "seed": seed}
        if ref is not None and any(b != "tier1" for b in benches):
            meta["trust_spec"] = "off and on (recovery)" if compare_trust_spec else ("on" if trust_spec else "off")
        if "tier1" in benches:
            meta["tier-1 suite"] = "no model, default spec policy and trust_spec"
        with shared.exit_on(ValueError, FileNotFoundError):
            report = run_eval(
                benches, out, refiner=ref, upstream_file=upstream_file, upstream_base_url=upstream_base_url,
                upstream_model=upstream_model, upstream_scripted=upstream_scripted, cache_file=cache_file, limit=limit,
                upstream_settings={"max_tokens": upstream_max_tokens, "temperature": upstream_temperature,
                                   "enable_thinking": upstream_thinking},
                recovery_sources=shared.split_list(recovery_sources), clean_ratio=clean_ratio,
                recovery_trust_spec=(False, True) if compare_trust_spec else None, seed=seed, meta=meta,
                progress=not quiet, chart=chart, data_dir=data_dir, bfcl_wheel=bfcl_wheel,
                bfcl_categories=shared.split_list(bfcl_categories) or None, bfcl_format=bfcl_format,
                apibank_adjustments=apibank_adjustments)
        typer.echo(report.read_text(encoding="utf-8"))
        typer.echo(f"written: {report}")
