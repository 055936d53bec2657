"""``formats`` (list the wire formats, print an example; ``formats derive``: a dialect from a chat template) and
``convert`` (between formats, on a file, stdin or one field of a JSONL file)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from refiner.commands import exit_on, fail


def readme_list() -> str:
    """The README's list of wire formats, generated from the registry (``tool-refiner formats --markdown``)."""
    from refiner import formats

    names = [f"`{f.name}`" for f in formats.all_formats()]
    return f"{len(names)} formats: {', '.join(names)}.\n"


def derived_text(d: dict) -> str:
    """A derivation (``Derived.as_dict()``) for people: the result, the record (each literal with the renders it came
    from), what could not be derived and why, the row's spelling, the checks and the example."""
    lines = [f"template: {d['template']} (sha256 {d['sha256'][:16]}...)"]
    if d["result"] == "special":
        lines.append(f"result: special: {d['why']}")
    elif d["from_record"]:
        lines.append(f"result: {d['name']!r}, read and written by the generic reader of the record below (no "
                     "grammar row holds this family)")
    else:
        same = f" (the same spelling as the built-in row {d['same_as']!r})" if d.get("same_as") else ""
        lines.append(f"result: row {d['name']!r} of the {d['grammar']} grammar{same}")
    rec = d["record"]
    lines.append(f"record (diffing renders; every literal as the template writes it): shape {rec['shape'] or '-'}")
    for key, value in rec.items():
        if key in ("derived_from", "shape") or value in ("", False, {}, []):
            continue
        shown = json.dumps(value, ensure_ascii=False)
        lines.append(f"  {key:<24} {shown:<40} {rec['derived_from'].get(key, '')}")
    lines += [f"not derived: {why}" for why in d["not_derived"]]
    if d.get("spelling"):
        lines.append("row spelling:")
        lines += [f"  {k:<18} {json.dumps(v, ensure_ascii=False)}" for k, v in d["spelling"].items()]
    if d["read_by"]:
        lines.append(f"read exactly by the built-in format(s): {', '.join(d['read_by'])}")
    if d["writes_as"]:
        lines.append(f"written as the template writes it by: {', '.join(d['writes_as'])}")
    lines += [f"check: {check}" for check in d["checks"]]
    lines.append("renders (the tool section of each):")
    lines += [f"  {key}: {json.dumps(text, ensure_ascii=False)}" for key, text in d["renders"].items()]
    if d.get("example"):
        lines += ["example (the format's render of two calls):", d["example"]]
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        help="List the tool-call wire formats (name, order sensitivity, tags, description); "
        "derive a family's dialect from its chat template (formats derive).",
        invoke_without_command=True,
        no_args_is_help=False,
    )
    app.add_typer(group, name="formats")

    @group.command("derive")
    def derive_cmd(
        template: Path | None = typer.Argument(None, help="The chat template (as --chat-template)."),
        chat_template: Path | None = typer.Option(None, "--chat-template", help="A .jinja file, a "
                                                  "tokenizer_config.json, or a model folder holding "
                                                  "chat_template.jinja or tokenizer_config.json."),
        name: str | None = typer.Option(None, "--name", help="The derived row's name (default derived_<sha256>)."),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable derivation."),
    ) -> None:
        """Derive a model family's tool-call dialect from its chat template: render known calls through it (jinja2,
        as transformers does), diff the renders into one record of the family's literals, and map it onto a grammar's
        row, else read it with the generic record reader; prints the record and says what could not be derived and
        why."""
        from refiner.formats.derive import TemplateFailure, derive

        chat_template = chat_template or template
        if chat_template is None:
            fail("give the chat template: tool-refiner formats derive TEMPLATE")
        with exit_on(TemplateFailure):
            d = derive(chat_template, name).as_dict()
        typer.echo(json.dumps(d, indent=2, ensure_ascii=False) if as_json else derived_text(d), nl=not as_json)
        if d["result"] == "special" and not d["read_by"]:
            raise typer.Exit(1)

    @group.callback()
    def formats_cmd(
        ctx: typer.Context,
        example: str | None = typer.Option(None, "--example", help="Print the example text of FORMAT."),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable list."),
        markdown: bool = typer.Option(False, "--markdown", help="The README's list of formats."),
    ) -> None:
        """List the tool-call wire formats (name, order sensitivity, tags, description)."""
        if ctx.invoked_subcommand is not None:
            return
        from refiner import formats

        if example is not None:
            try:
                typer.echo(formats.get(example).example + "\n", nl=False)
            except KeyError as e:
                fail(str(e.args[0]))
            return
        if markdown:
            typer.echo(readme_list(), nl=False)
            return
        rows = [{"name": f.name, "order_sensitive": f.order_sensitive, "tags": list(f.tags),
                 "description": f.description} for f in formats.all_formats()]
        if as_json:
            typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
            return
        typer.echo(f"{'name':<10} {'ordered':<8} {'tags':<40} description")
        for r in rows:
            tags = " ".join(r["tags"])
            typer.echo(f"{r['name']:<10} {'yes' if r['order_sensitive'] else 'no':<8} {tags:<40} {r['description']}")

    @app.command("convert")
    def convert_cmd(
        input_path: Path | None = typer.Argument(None, help="Input file (default: stdin; '-' for stdin)."),
        src: str = typer.Option("auto", "--from", help="Source format, or 'auto' to detect it."),
        dst: str = typer.Option(..., "--to", help="Target format."),
        output: Path | None = typer.Option(None, "--output", "-o", help="Output file (default: stdout)."),
        lenient: bool = typer.Option(False, "--lenient", help="Recover what parses; report problems on stderr."),
        jsonl: bool = typer.Option(False, "--jsonl", help="Input is JSONL; convert --field of every record."),
        field: str | None = typer.Option(None, "--field", help="With --jsonl: the field holding the calls."),
        out_field: str | None = typer.Option(None, "--out-field", help="With --jsonl: write here (default: --field)."),
    ) -> None:
        """Convert tool calls from one wire format to another."""
        from refiner import formats
        from refiner.formats.convert import ConvertError, convert_jsonl, convert_text

        for name in {dst} | ({src} - {"auto"}):
            if name not in formats.names():
                fail(f"unknown format {name!r}; known: {', '.join(formats.names())}")
        if jsonl and not field:
            fail("--jsonl needs --field")
        source = "<stdin>" if input_path in (None, Path("-")) else str(input_path)
        try:
            text = sys.stdin.read() if source == "<stdin>" else input_path.read_text(encoding="utf-8")
        except OSError as e:
            fail(f"{source}: {e.strerror or e}")
        with exit_on(ConvertError):
            if jsonl:
                out_lines, n_calls, n_problems = [], 0, 0
                for record, done in convert_jsonl(
                    text.splitlines(), src, dst, field, lenient=lenient, source=source, out_field=out_field
                ):
                    out_lines.append(json.dumps(record, ensure_ascii=False))
                    n_calls += done.calls
                    for p in done.problems:
                        typer.echo(f"{source}:{len(out_lines)}: {p}", err=True)
                    n_problems += len(done.problems)
                result = "\n".join(out_lines) + ("\n" if out_lines else "")
                summary = f"{len(out_lines)} records, {n_calls} calls, {n_problems} problems"
            else:
                done = convert_text(text, src, dst, lenient=lenient, where=source)
                for p in done.problems:
                    typer.echo(f"{source}: {p}", err=True)
                result = done.text + "\n"
                summary = f"{done.calls} calls from {done.source_format}"
        if output is None:
            typer.echo(result, nl=False)
        else:
            output.write_text(result, encoding="utf-8")
            typer.echo(f"wrote {output} ({summary})", err=True)
