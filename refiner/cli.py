"""The ``tool-refiner`` command line: each area's commands come from its module in ``refiner/commands/``, imported
here (a missing one fails at start-up)."""

from __future__ import annotations

import typer

from refiner import __version__
from refiner.commands import data, formats, inference, serve, train
from refiner.commands import eval as eval_commands

app = typer.Typer(
    name="tool-refiner",
    help="Build data, train, serve and evaluate a small model that corrects the tool calls of any upstream LLM.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: readable when piped and in an 80-column terminal
)

# One module per area, in the order ``--help`` lists them; each defines register(app).
COMMAND_MODULES = (formats, data, train, inference, serve, eval_commands)


@app.command()
def version() -> None:
    """Print the installed tool-refiner version."""
    typer.echo(__version__)


for _module in COMMAND_MODULES:
    _module.register(app)


if __name__ == "__main__":  # pragma: no cover - python -m refiner.cli
    app()
