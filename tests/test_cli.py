"""The CLI assembles every command area; a missing area is an error at start-up, never a silently absent command."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import textwrap

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
    """With one area's module unimportable, starting the CLI raises naming it (it used to be skipped)."""
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
