"""``repair`` (tier 1 + guard, no model) and ``refine`` (the full pipeline): requests JSONL in, one result per line
out, in order; a line that is not a readable request becomes an error result naming its line."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import nullcontext
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import typer

from refiner import commands as shared
from refiner.engines.base import batches
from refiner.pipeline import Refiner, RequestError, error_result, validate_request

BUNDLED = "requests.jsonl"  # in refiner/examples/


def bundled_requests_path() -> Path:
    """The small embedded set of broken upstream requests that ``tool-refiner repair`` runs on by default."""
    return Path(str(resources.files("refiner") / "examples" / BUNDLED))


def read_requests(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """``(line number, request or raw line, error or None)`` for every non-blank line of a JSONL file."""
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                yield lineno, line.rstrip("\n"), f"{path}:{lineno}: not valid JSON: {e.msg} (column {e.colno})"
                continue
            try:
                validate_request(obj)
            except RequestError as e:
                yield lineno, obj, f"{path}:{lineno}: {e}"
                continue
            yield lineno, obj, None


def run_jsonl(refiner: Refiner, src: Path, out: TextIO, *, batch_size: int, progress: bool) -> list[dict]:
    """Refines every request of ``src`` in batches, writing one JSON result per line to ``out``; returns them."""
    results: list[dict] = []
    for chunk in batches(list(read_requests(src)), batch_size, "refining", progress=progress, unit="req"):
        good = [(n, obj) for n, obj, err in chunk if err is None]
        refined = iter(refiner.refine_batch([obj for _, obj in good], errors="result"))
        for lineno, obj, err in chunk:
            res = error_result(obj, err, line=lineno) if err else {**next(refined), "line": lineno}
            out.write(json.dumps(res, ensure_ascii=False) + "\n")
            results.append(res)
    return results


def summary_table(results: list[dict]) -> str:
    """Counts by stage, gate verdicts before and after, and the most frequent repairs."""
    stages = Counter(r.get("stage") for r in results)
    before = sum(1 for r in results if r.get("stage") != "error" and not _errors(r.get("upstream_diagnostics")))
    after = sum(1 for r in results if r.get("stage") != "error" and not _errors(r.get("diagnostics")))
    actions = Counter(a["code"] for r in results for a in r.get("actions") or [])
    rows = [("requests", len(results))]
    rows += [(f"  stage {s}", stages[s]) for s in ("unchanged", "repaired", "model", "fallback", "error") if stages[s]]
    rows += [("gate passes: upstream", before), ("gate passes: result", after)]
    rows += [(f"  repair {kind}", count) for kind, count in actions.most_common()]
    return "\n".join(f"{label:<28}{count:>6}" for label, count in rows)


def request_table(results: list[dict]) -> str:
    """One line per result: line, format, stage, gate errors before → after, the repairs made."""
    head = f"{'line':>4}  {'format':<10}{'stage':<10}{'errors':>8}  repairs"
    rows = [head, "-" * len(head)]
    for r in results:
        errs = f"{_errors(r.get('upstream_diagnostics'))}->{_errors(r.get('diagnostics'))}"
        kinds = ",".join(dict.fromkeys(a["code"] for a in r.get("actions") or [])) or "-"
        rows.append(f"{r.get('line', ''):>4}  {r.get('format', '-')!s:<10}{r.get('stage', ''):<10}{errs:>8}  {kinds}")
    return "\n".join(rows)


def _errors(diags: Any) -> int:
    return sum(1 for d in diags or [] if d.get("severity") == "error")


def _open_out(path: Path | None) -> Any:
    """The results file to write, or stdout (left open)."""
    return path.open("w", encoding="utf-8") if path else nullcontext(sys.stdout)


def register(app: typer.Typer) -> None:
    @app.command("repair")
    def repair(
        src: Path | None = typer.Argument(None, exists=True, dir_okay=False,
                                          help="Requests JSONL (default: the bundled broken examples)."),
        output: Path | None = shared.OUTPUT,
        fmt: str | None = shared.FORMAT,
        batch_size: int = typer.Option(256, help="Requests per batch."),
        trust_spec: bool = shared.TRUST_SPEC,
    ) -> None:
        """Tier-1 repair (no model) + never-worse guard on every request; prints a summary table."""
        path = src or bundled_requests_path()
        demo = src is None and output is None  # the bundled examples: show a table instead of the JSONL
        with open(os.devnull, "w") if demo else _open_out(output) as out:
            results = run_jsonl(Refiner(None, fmt, trust_spec=trust_spec), path, out, batch_size=batch_size,
                                progress=output is not None)
        if demo:
            typer.echo(request_table(results) + "\n")
        typer.echo(f"{path}\n{summary_table(results)}", err=output is None and not demo)

    @app.command("refine")
    def refine(
        src: Path = typer.Argument(..., exists=True, dir_okay=False, help="Requests JSONL."),
        output: Path | None = shared.OUTPUT,
        model: str = typer.Option(..., "--model", help="Refiner model: a local path or a served model id."),
        engine: str = typer.Option("vllm", "--engine", help="vllm | openai | hf"),
        base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (engine openai)."),
        thinking: bool | None = typer.Option(None, "--thinking/--no-thinking", help="Model reasoning on/off."),
        n: int = typer.Option(1, "--n", min=1, help="Samples per request (best of N by gate and agreement)."),
        bypass: bool = typer.Option(True, "--bypass/--no-bypass", help="Skip the model when tier 1 passes the gate."),
        fmt: str | None = shared.FORMAT,
        temperature: float | None = typer.Option(None, help="Sampling temperature (default 0, or 0.7 with --n>1)."),
        max_tokens: int = typer.Option(1024, help="Generation budget per sample."),
        batch_size: int = typer.Option(64, help="Requests per engine call."),
        trust_spec: bool = shared.TRUST_SPEC,
    ) -> None:
        """Full pipeline: parse, gate, tier-1 repair, the refiner model where still needed, never-worse guard."""
        from refiner.commands.serve import build_refiner

        ref = build_refiner(model=model, refiner_base_url=base_url, engine=engine, fmt=fmt, n=n, thinking=thinking,
                            bypass=bypass, temperature=temperature, max_tokens=max_tokens, trust_spec=trust_spec)
        with _open_out(output) as out:
            results = run_jsonl(ref, src, out, batch_size=batch_size, progress=True)
        typer.echo(summary_table(results), err=True)

