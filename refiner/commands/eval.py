"""``tool-refiner eval``: the paper's benchmarks and corruption recovery, for any upstream model, raw vs refined."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_cmd(
        bench: str = typer.Option("apibank,nestful,bamboogle,bfcl", help="Comma-separated: apibank, nestful, "
                                  "bamboogle, bfcl, recovery."),
        out: Path = typer.Option(..., help="Results folder (outputs, summary.json, report.md, chart.png)."),
        upstream_file: Optional[Path] = typer.Option(None, help="JSONL of {id, output} upstream outputs."),
        upstream_base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint of the upstream "
                                                        "model, e.g. http://127.0.0.1:8000/v1."),
        upstream_model: Optional[str] = typer.Option(None, help="Upstream model name at the endpoint."),
        upstream_scripted: Optional[float] = typer.Option(None, help="Script the upstream from the gold answers, "
                                                          "rule-corrupted with this probability (0-1)."),
        upstream_max_tokens: int = typer.Option(1024, help="Upstream generation length."),
        upstream_temperature: float = typer.Option(0.0, help="Upstream sampling temperature."),
        cache_file: Optional[Path] = typer.Option(None, help="Upstream answer cache (default OUT/upstream_cache"
                                                  ".jsonl); a rerun sends only uncached prompts."),
        refiner: str = typer.Option("tier1", help="tier1 (no model), none (raw scores only) or model (needs "
                                    "--model)."),
        model: Optional[str] = typer.Option(None, help="Refiner model path/name (implies --refiner model)."),
        engine: str = typer.Option("vllm", help="Refiner engine: vllm, hf or openai."),
        refiner_base_url: Optional[str] = typer.Option(None, help="Endpoint serving the refiner (engine openai)."),
        n: int = typer.Option(1, help="Refiner samples per request (best of n)."),
        limit: Optional[int] = typer.Option(None, help="Samples per benchmark (spread over its subsets)."),
        data_dir: Optional[Path] = typer.Option(None, help="Public data folder (default ../shared/data or "
                                                "$TOOL_REFINER_SHARED_DATA)."),
        bfcl_wheel: Optional[Path] = typer.Option(None, help="bfcl-eval wheel (default .cache/bfcl/*.whl)."),
        bfcl_categories: Optional[str] = typer.Option(None, help="Comma-separated BFCL categories."),
        bfcl_format: str = typer.Option("toolace", help="Wire format BFCL answers are parsed in."),
        no_apibank_adjustments: bool = typer.Option(False, help="Turn off the paper's refiner-side API-Bank "
                                                    "adjustments (tool calls only, numbers as strings)."),
        recovery_sources: str = typer.Option("apibank,nestful,bamboogle,bfcl", help="Sources of gold calls for "
                                             "the recovery benchmark."),
        clean_ratio: float = typer.Option(0.15, help="Share of uncorrupted inputs in recovery (measures harm)."),
        seed: int = typer.Option(0, help="Seed for sampling, in-context examples and corruption."),
        no_chart: bool = typer.Option(False, help="Skip the PNG chart."),
        quiet: bool = typer.Option(False, help="No progress bars."),
    ) -> None:
        """Scores upstream tool calls on API-Bank, NESTFUL, Bamboogle*, BFCL and corruption recovery, raw and refined,
        and writes OUT/report.md with the paper's tables."""
        from refiner.eval.runner import run_eval
        from refiner.pipeline import Refiner

        kind = "model" if model else refiner
        if kind == "none":
            ref, ref_name = None, None
        elif kind == "tier1":
            ref, ref_name = Refiner(engine=None), "Refiner tier 1"
        elif kind == "model":
            if not model and not refiner_base_url:
                raise typer.BadParameter("--refiner model needs --model (or --refiner-base-url with --engine openai)")
            from refiner.engines import make_engine

            eng = make_engine(engine, model=model, base_url=refiner_base_url)
            ref, ref_name = Refiner(engine=eng, n=n), f"Refiner {model or refiner_base_url}"
        else:
            raise typer.BadParameter(f"--refiner must be tier1, none or model, got {refiner!r}")
        if upstream_base_url and not upstream_model:
            raise typer.BadParameter("--upstream-base-url needs --upstream-model")
        upstream_name = upstream_model or (upstream_file.name if upstream_file else None) or (
            f"gold, {upstream_scripted:.0%} rule-corrupted" if upstream_scripted is not None else "upstream")
        meta = {"upstream": upstream_name, "refiner": ref_name or "none", "limit": limit, "seed": seed}
        try:
            report = run_eval(
                [b.strip() for b in bench.split(",") if b.strip()],
                out,
                refiner=ref,
                upstream_file=upstream_file,
                upstream_base_url=upstream_base_url,
                upstream_model=upstream_model,
                upstream_scripted=upstream_scripted,
                upstream_settings={"max_tokens": upstream_max_tokens, "temperature": upstream_temperature},
                cache_file=cache_file,
                limit=limit,
                recovery_sources=[s.strip() for s in recovery_sources.split(",") if s.strip()],
                clean_ratio=clean_ratio,
                seed=seed,
                meta=meta,
                progress=not quiet,
                chart=not no_chart,
                data_dir=data_dir,
                bfcl_wheel=bfcl_wheel,
                bfcl_categories=[c.strip() for c in bfcl_categories.split(",")] if bfcl_categories else None,
                bfcl_format=bfcl_format,
                apibank_adjustments=not no_apibank_adjustments,
            )
        except (ValueError, FileNotFoundError) as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        typer.echo(report.read_text(encoding="utf-8"))
        typer.echo(f"written: {report}")
