"""The CLI assembles every command area; a missing area is an error at start-up, never a silently absent command."""

from __future__ import annotations

import itertools
import os
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


def _command_paths(command, path=()):
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _command_paths(sub, (*path, name))


def _is_lone_word(line: str) -> bool:
    text = line.strip()
    return bool(text) and " " not in text and not text.endswith(":")


def test_every_help_is_plain_text_that_fits_80_columns_when_piped():
    """Every command's ``--help``, printed through a pipe with COLUMNS=80 (as ``tool-refiner serve --help | cat`` in a
    narrow terminal): no panel borders, every line within 80 characters, every option's whole name written out, and
    never two lone words on consecutive lines (a panel squashed to one word a line)."""
    root = typer.main.get_command(cli.app)
    paths = list(_command_paths(root))
    script = textwrap.dedent("""
        import sys
        from refiner import cli
        for argv in sys.argv[1:]:
            print("=== " + argv, flush=True)
            try:
                cli.app([*argv.split(), "--help"], prog_name="tool-refiner")
            except SystemExit as e:
                assert e.code == 0, (argv, e.code)
    """)
    res = subprocess.run([sys.executable, "-c", script, *(" ".join(p) for p in paths)], capture_output=True,
                         text=True, cwd=ROOT, check=False, env={**os.environ, "COLUMNS": "80", "TERM": "dumb"},
                         timeout=300)
    assert res.returncode == 0, res.stderr
    helps = dict(zip((" ".join(p) for p in paths), res.stdout.split("=== ")[1:]))
    assert len(helps) == len(paths) > 10
    for argv, text in helps.items():
        lines = text.splitlines()[1:]
        assert not set("╭│╰─…") & set(text), argv
        assert max(len(line) for line in lines) <= 80, argv
        assert not any(_is_lone_word(a) and _is_lone_word(b) for a, b in itertools.pairwise(lines)), (argv, text)
        command = root
        for name in argv.split():
            command = command.commands[name]
        for param in command.params:
            for opt in [*param.opts, *param.secondary_opts]:
                if opt.startswith("--"):
                    assert opt in text, (argv, opt)
