"""``data build`` (training parquet for verl) and ``data stats`` (the mix and prompt lengths of a built folder)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from refiner.commands import exit_on, key_values


def register(app: typer.Typer) -> None:
    data_app = typer.Typer(help="Build and inspect the refiner's training data.", no_args_is_help=True)
    app.add_typer(data_app, name="data")

    @data_app.command("build")
    def build_cmd(
        out: Path = typer.Option(..., "--out", "-o", help="Output folder (train/validation parquet, manifest)."),
        config: Path | None = typer.Option(None, "--config", "-c", help="Data config YAML (configs/data/)."),
        source_path: list[str] | None = typer.Option(None, "--source-path", help="NAME=PATH local copy."),
        corruptor: str | None = typer.Option(None, help="rules | llm (overrides the config)."),
        seed: int | None = typer.Option(None, help="Random seed (overrides the config)."),
        reward_variant: str | None = typer.Option(
            None, help="paper | strict: the reward that checks rows (overrides the config)."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    ) -> None:
        """Build the training set (the paper's four data types) as verl parquet."""
        from data_gen.builder import build
        from data_gen.config import load_config
        from data_gen.sources import SourceUnavailable

        over = {k: v for k, v in (("corruptor", corruptor), ("seed", seed), ("reward_variant", reward_variant))
                if v is not None}
        with exit_on(SourceUnavailable, FileNotFoundError, ValueError):
            cfg = load_config(config, **over)
            paths = {name: path.strip() for name, path in key_values(source_path, "--source-path", "NAME=PATH")}
            if "" in paths.values():
                raise typer.BadParameter("--source-path expects NAME=PATH, with a path")
            report = build(cfg, out, source_paths=paths, progress=not quiet)
        summary = report.to_json()
        typer.echo(json.dumps({k: summary[k] for k in ("rows", "per_type_source", "rejected", "substitutions",
                                                       "unavailable_sources", "seconds")}, indent=2))
        typer.echo(report.sources_text())
        skipped = sum(s["count"] for s in summary["skipped_records"])
        typer.echo(f"skipped source records: {skipped} (per source and reason in {out / 'manifest.json'}, "
                   "key 'sources')")

    @data_app.command("stats")
    def stats_cmd(
        data_dir: Path = typer.Argument(..., help="A folder written by 'data build'."),
        tokenizer: str | None = typer.Option(None, help="Tokenizer folder/name for token lengths."),
        max_prompt_length: int | None = typer.Option(None, help="Warn above this many prompt tokens."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Mix per source, data type and error class; prompt lengths; warnings for over-long prompts."""
        from data_gen.stats import data_stats, format_stats

        with exit_on(FileNotFoundError):
            st = data_stats(data_dir, tokenizer=tokenizer, max_prompt_length=max_prompt_length)
        typer.echo(json.dumps(st, indent=2) if as_json else format_stats(st))
