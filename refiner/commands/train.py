"""``train`` (DAPO on verl), ``sft`` (warm start), ``export`` (FSDP checkpoint -> HF folder + card), ``plot``."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import typer

from refiner.train import TrainConfigError


def _fail(e: Exception) -> None:
    typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


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
        from refiner import train as T

        try:
            recipe = T.load_recipe(config or T.DEFAULT_RECIPE)
            choices = {k: v for k, v in (("thinking", thinking), ("reward", reward)) if v is not None}
            extra = list(overrides or [])
            if no_wandb:
                extra.append("trainer.logger=[console,file]")
            ov = T.plan_overrides(recipe, profile=profile, choices=choices, data_dir=data, model=model, extra=extra)
            ckpt = T.checkpoint_dir(ov)
            if ray_address is None:
                # Local run: absolute checkpoint dir (created with the launch record below) and the JSONL metrics
                # file inside it. On a cluster both stay verl's defaults, relative to the job's working dir.
                if T.override_value(ov, "trainer.default_local_dir") is None:
                    ov.append(f"trainer.default_local_dir={ckpt.resolve()}")
                metrics = (ckpt / "metrics.jsonl").resolve()
                ov.append(f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={metrics}")
            summary = {} if skip_checks else T.validate_inputs(ov)  # cheap checks first
            cfg = T.compose_verl_config(ov, recipe.base)
            T.check_verl_config(cfg)
        except TrainConfigError as e:
            _fail(e)
        cmd = T.ray_submit_command(ov, ray_address) if ray_address else T.main_ppo_command(ov)
        typer.echo(T.format_command(cmd))
        if dry_run:
            return
        T.write_manifest(
            ckpt,
            {
                "kind": "dapo",
                "recipe": str(recipe.path),
                "profile": profile or recipe.default_profile,
                "overrides": ov,
                "command": T.format_command(cmd),
                "data": summary,
                "launched": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            },
        )
        raise typer.Exit(T.run_command(cmd))

    @app.command("sft")
    def sft_cmd(
        overrides: list[str] | None = typer.Argument(None, help="Extra Hydra overrides for verl's SFT trainer."),
        data: Path = typer.Option(..., help="Data builder output folder (the RL parquet files)."),
        config: Path = typer.Option(None, "--config", "-c", help="Recipe YAML (default configs/sft/paper.yaml)."),
        profile: str | None = typer.Option(None, help="Hardware profile from the recipe."),
        model: str | None = typer.Option(None, help="Model folder or hub id."),
        thinking: str | None = typer.Option(None, help="Qwen3 thinking: on | off."),
        no_wandb: bool = typer.Option(False, "--no-wandb"),
        dry_run: bool = typer.Option(False, "--dry-run"),
    ) -> None:
        """Supervised warm start on the same triplets (target = the correct calls); then export and train --model."""
        from refiner import train as T

        try:
            recipe = T.load_recipe(config or T.DEFAULT_SFT_RECIPE)
            train_rl, val_rl = T.find_data_files(data)
            sft_dir = data / "sft"
            n_train = T.rl_to_sft_parquet(train_rl, sft_dir / "train.parquet")
            n_val = T.rl_to_sft_parquet(val_rl, sft_dir / "val.parquet")
            typer.echo(f"SFT data: {n_train} train / {n_val} val rows in {sft_dir}", err=True)
            extra = list(overrides or [])
            if no_wandb:
                extra.append("trainer.logger=[console,file]")
            choices = {"thinking": thinking} if thinking else {}
            ov = T.plan_overrides(
                recipe,
                profile=profile,
                choices=choices,
                train_files=sft_dir / "train.parquet",
                val_files=sft_dir / "val.parquet",
                model=model,
                extra=extra,
            )
            T.compose_verl_config(ov, recipe.base)
            T.validate_model_path(T.override_value(ov, "model.path"))
            nproc = int(T.override_value(ov, "trainer.n_gpus_per_node") or 1)
            nnodes = int(T.override_value(ov, "trainer.nnodes") or 1)
        except TrainConfigError as e:
            _fail(e)
        cmd = T.sft_command(ov, nproc_per_node=nproc, nnodes=nnodes)
        typer.echo(T.format_command(cmd))
        if dry_run:
            return
        ckpt = T.checkpoint_dir(ov)
        T.write_manifest(
            ckpt,
            {
                "kind": "sft",
                "recipe": str(recipe.path),
                "profile": profile,
                "overrides": ov,
                "command": T.format_command(cmd),
            },
        )
        raise typer.Exit(T.run_command(cmd))

    @app.command("export")
    def export_cmd(
        ckpt_dir: Path = typer.Argument(..., help="verl checkpoint: trainer root, global_step_N, or its actor/."),
        out: Path = typer.Option(..., "--out", "-o", help="Hugging Face output folder."),
        log: Path | None = typer.Option(None, help="Metrics log (JSONL or console) for the model card."),
        card_only: bool = typer.Option(False, "--card-only", help="Only (re)write README.md."),
    ) -> None:
        """Merge FSDP shards into a Hugging Face folder (verl.model_merger) and write its model card."""
        from refiner.export import export_checkpoint

        try:
            path = export_checkpoint(ckpt_dir, out, metrics_log=log, run_merge=not card_only)
        except TrainConfigError as e:
            _fail(e)
        typer.echo(str(path))

    @app.command("plot")
    def plot_cmd(
        run_log: Path = typer.Argument(..., help="verl console log or file-logger JSONL."),
        out: Path = typer.Option(Path("training_curves.png"), "--out", "-o"),
        title: str | None = typer.Option(None),
    ) -> None:
        """Reward and response-length curves of a run (paper Figure 2)."""
        from refiner.plot import PlotError, plot_run

        try:
            counts = plot_run(run_log, out, title=title)
        except PlotError as e:
            _fail(e)
        for label, n in counts.items():
            typer.echo(f"{label}: {n} points", err=True)
        typer.echo(str(out))
