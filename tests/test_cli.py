"""The CLI assembles every command area; a missing area is an error at start-up, never a silently absent command."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import textwrap

import pytest
import typer
import typer.main

import refiner.commands
from refiner import cli

ROOT = cli.__file__.rsplit("/refiner/", 1)[0]


def _command_names(app: typer.Typer) -> set[str]:
    return set(typer.main.get_group(app).commands)


def test_every_command_module_is_assembled():
    modules = {m.name for m in pkgutil.iter_modules(refiner.commands.__path__)}
    assert {m.__name__.rsplit(".", 1)[1] for m in cli.COMMAND_MODULES} == modules
    assembled = _command_names(cli.app)
    for module in cli.COMMAND_MODULES:
        alone = typer.Typer()
        module.register(alone)
        names = _command_names(alone)
        assert names and names <= assembled, module.__name__


def test_a_missing_command_module_fails_loudly():
    """With one area's module unimportable, starting the CLI raises naming it (it is not skipped)."""
    script = textwrap.dedent("""
        import importlib.abc, sys

        class Hide(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "refiner.commands.serve":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, Hide())
        import refiner.cli
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False,
                         env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"}, timeout=120)
    assert res.returncode != 0
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(("ImportError", "ModuleNotFoundError")) and "serve" in last, res.stderr


@pytest.mark.parametrize("argv", [["serve", "--help"], ["data", "build", "--help"], ["formats", "derive", "--help"]])
def test_help_is_plain_text_that_fits_80_columns(argv):
    """Help piped or in an 80-column terminal: no panel borders, every line within 80 characters, every option's
    whole name written out."""
    from typer.testing import CliRunner

    result = CliRunner().invoke(cli.app, argv, terminal_width=80)
    assert result.exit_code == 0, result.output
    assert not set("╭│╰─…") & set(result.output)
    assert max(len(line) for line in result.output.splitlines()) <= 80
    command = typer.main.get_command(cli.app)
    for name in argv[:-1]:
        command = command.commands[name]
    for param in command.params:
        for opt in [*param.opts, *param.secondary_opts]:
            if opt.startswith("--"):
                assert opt in result.output, opt
