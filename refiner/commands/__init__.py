"""CLI subcommands, one module per area, each with ``register(app)``; kept thin (parse options, call the library,
print). The helpers here are the ones several areas share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer


@contextmanager
def exit_on(*errors: type[Exception], prefix: str = "error") -> Iterator[None]:
    """``with exit_on(ValueError): ...``: one of ``errors`` becomes ``prefix: message`` on stderr and exit code 2."""
    try:
        yield
    except errors as e:
        typer.secho(f"{prefix}: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None


def split_list(text: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (a comma-separated option)."""
    return [x.strip() for x in (text or "").split(",") if x.strip()]
