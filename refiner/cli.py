"""The ``tool-refiner`` command line: a thin shell over library functions.

Each area registers its subcommands from its own module in ``refiner/commands/`` (``register(app)``), so this file
only assembles them.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="tool-refiner",
    help="Build data, train, serve and evaluate a small model that corrects the tool calls of any upstream LLM.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# One module per area; each defines register(app). A module that does not exist yet is skipped.
COMMAND_MODULES = ("formats", "data", "train", "inference", "serve", "eval")


@app.command()
def version() -> None:
    """Print the installed tool-refiner version."""
    from refiner import __version__

    typer.echo(__version__)


for _name in COMMAND_MODULES:
    try:
        _mod = importlib.import_module(f"refiner.commands.{_name}")
    except ModuleNotFoundError as e:
        if e.name != f"refiner.commands.{_name}":
            raise
        continue
    _mod.register(app)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
