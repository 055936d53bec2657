"""``train`` (DAPO on verl), ``sft`` (warm start), ``export`` (FSDP checkpoint -> HF folder + card), ``plot``."""

from __future__ import annotations

from pathlib import Path

import typer

from refiner.commands import exit_on
from refiner.train.errors import TrainConfigError


def _start(launch, dry_run: bool) -> None:
    """Prints a planned launch's notes and command, then runs it unless ``dry_run``."""
    from refiner.train.launch import start

    for note in launch.notes:
        typer.echo(note, err=True)
    typer.echo(launch.text)
    if not dry_run:
        with exit_on(TrainConfigError):
            code = start(launch)
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    @app.command("train")
    def train_cmd(
        overrides: list[str] | None = typer.Argument(None, help="Extra Hydra overrides for verl, key=value."),
        config: Path = typer.Option(None, "--config", "-c", help="Recipe YAML (default configs/verl/paper.yaml)."),
        profile: str | None = typer.Option(None, help="Hardware profile from the recipe (gpu24, gpu80, ...)."),
        data: Path | None = typer.Option(None, help="Data builder output folder (train.parquet + val.parquet)."),
        model: str | None = typer.Option(None, help="Model folder or hub id (default: the recipe's model)."),
        thinking: str | None = typer.Option(None, help="Qwen3 thinking: on | off."),
        reward: str | None = typer.Option(None, help="Reward variant: paper | strict."),
        no_wandb: bool = typer.Option(False, "--no-wandb", help="Log to console + JSONL only."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Validate and print the command; launch nothing."),
        ray_address: str | None = typer.Option(None, help="Submit to this Ray cluster (ray job submit)."),
        skip_checks: bool = typer.Option(False, "--skip-checks", help="Skip the data/model checks (paths on cluster)."),
    ) -> None:
        """Train the refiner with DAPO on verl 0.9.1 (locally, or as a Ray job)."""
        from refiner.train.launch import plan_dapo

        choices = {k: v for k, v in (("thinking", thinking), ("reward", reward)) if v is not None}
        with exit_on(TrainConfigError):
            launch = plan_dapo(config=config, profile=profile, choices=choices, data=data, model=model,
                               extra=overrides or [], no_wandb=no_wandb, ray_address=ray_address,
                               skip_checks=skip_checks)
        _start(launch, dry_run)

    @app.command("sft")
    def sft_cmd(
        overrides: list[str] | None = typer.Argument(None, help="Extra Hydra overrides for verl's SFT trainer."),
        data: Path = typer.Option(..., help="Data builder output folder (the RL parquet files)."),
        config: Path = typer.Option(None, "--config", "-c", help="Recipe YAML (default configs/sft/paper.yaml)."),
        profile: str | None = typer.Option(None, help="Hardware profile from the recipe."),
        model: str | None = typer.Option(None, help="Model folder or hub id."),
        thinking: str | None = typer.Option(None, help="Qwen3 thinking: on | off."),
        no_wandb: bool = typer.Option(False, "--no-wandb", help="Log to console + JSONL only."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Validate and print the command; launch nothing."),
    ) -> None:
        """Supervised warm start on the same triplets (target = the correct calls); then export and train --model."""
        from refiner.train.launch import plan_sft

        with exit_on(TrainConfigError):
            launch = plan_sft(data=data, config=config, profile=profile, model=model, extra=overrides or [],
                              choices={"thinking": thinking} if thinking else {}, no_wandb=no_wandb)
        _start(launch, dry_run)

    @app.command("export")
    def export_cmd(
        ckpt_dir: Path = typer.Argument(..., help="verl checkpoint: trainer root, global_step_N, or its actor/."),
        out: Path = typer.Option(..., "--out", "-o", help="Hugging Face output folder."),
        log: Path | None = typer.Option(None, help="Metrics log (JSONL or console) for the model card."),
        card_only: bool = typer.Option(False, "--card-only", help="Only (re)write README.md."),
    ) -> None:
        """Merge FSDP shards into a Hugging Face folder (verl.model_merger) and write its model card."""
        from refiner.export import export_checkpoint

        with exit_on(TrainConfigError):
            path = export_checkpoint(ckpt_dir, out, metrics_log=log, run_merge=not card_only)
        typer.echo(str(path))

    @app.command("plot")
    def plot_cmd(
        run_log: Path = typer.Argument(..., help="verl console log or file-logger JSONL."),
        out: Path = typer.Option(Path("training_curves.png"), "--out", "-o"),
        title: str | None = typer.Option(None),
    ) -> None:
        """Reward and response-length curves of a run (paper Figure 2)."""
        from refiner.plot import PlotError, plot_run

        with exit_on(PlotError):
            counts = plot_run(run_log, out, title=title)
        for label, n in counts.items():
            typer.echo(f"{label}: {n} points", err=True)
        typer.echo(str(out))
