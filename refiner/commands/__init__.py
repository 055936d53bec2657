"""CLI subcommands, one module per area, each with ``register(app)``; kept thin (parse options, call the library,
print). The helpers here are the ones several areas share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer


def fail(message: object, prefix: str = "error") -> NoReturn:
    """``prefix: message`` on stderr, then exit code 2."""
    typer.secho(f"{prefix}: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


@contextmanager
def exit_on(*errors: type[Exception], prefix: str = "error") -> Iterator[None]:
    """``with exit_on(ValueError): ...``: one of ``errors`` becomes :func:`fail`'s message and exit code."""
    try:
        yield
    except errors as e:
        fail(e, prefix)


def key_values(items: list[str] | None, option: str, form: str, *, split_last: bool = False) -> list[tuple[str, str]]:
    """``KEY=VALUE`` option values as ``(key, value)`` pairs, split at the first ``=`` (the last with
    ``split_last``); ``BadParameter`` naming ``option`` and ``form`` for an item with no ``=`` or no key."""
    pairs = []
    for item in items or []:
        key, sep, value = item.rpartition("=") if split_last else item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{option} {item!r}: expected {form}")
        pairs.append((key.strip(), value))
    return pairs


def split_list(text: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (a comma-separated option)."""
    return [x.strip() for x in (text or "").split(",") if x.strip()]


# Options several commands share (a typer option object can be the default of more than one command).
MODEL = typer.Option(None, "--model", help="Refiner model: a local path (engines vllm, hf) or the served model name "
                     "(with --refiner-base-url). Without one: tier-1 repair + guard only.")
ENGINE = typer.Option(None, "--engine", help="vllm | openai | hf (default: openai with --refiner-base-url, else vllm).")
REFINER_BASE_URL = typer.Option(None, "--refiner-base-url", help="OpenAI-compatible endpoint serving the refiner "
                                "model, e.g. http://127.0.0.1:8001/v1 (engine openai).")
ENGINE_ARG = typer.Option(None, "--engine-arg", help="Extra engine setting KEY=VALUE (repeatable), e.g. "
                          "max_model_len=4096, dtype=float32.")
N = typer.Option(1, "--n", min=1, help="Refiner samples per request (best of n).")
THINKING = typer.Option(None, "--thinking/--no-thinking", help="Refiner reasoning on/off.")
MAX_TOKENS = typer.Option(1024, "--max-tokens", help="Refiner generation budget (reasoning included).")
TRUST_SPEC = typer.Option(False, "--trust-spec", help="Treat every tool spec as complete and exact: tier 1 then also "
                          "drops undeclared parameters and converts values to the declared types on calls that are "
                          "otherwise fine (by default those are left to the model).")
OUTPUT = typer.Option(None, "-o", "--output", help="Results JSONL (default: stdout).")
FORMAT = typer.Option(None, "--format", help="Output wire format (default: the upstream's).")
