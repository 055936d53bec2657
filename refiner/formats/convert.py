"""Converting tool-call text between formats: a text or one field of every JSONL record (strict unless ``lenient``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from refiner.formats.base import FormatError, get, names
from refiner.formats.detect import detect_format


class ConvertError(ValueError):
    """A text or record that could not be converted; the message says where."""


@dataclass
class Converted:
    text: str
    source_format: str
    calls: int
    problems: list[str] = field(default_factory=list)


def convert_text(
    text: str, src: str, dst: str, *, lenient: bool = False, where: str = "<input>", locate: bool = True
) -> Converted:
    """``text`` in format ``src`` (``"auto"`` detects it) rendered in format ``dst``. Errors start with ``where``
    (and, when ``locate``, the ``:line:column`` of the defect)."""
    if src == "auto":
        src = detect_format(text)
        if src is None:
            raise ConvertError(f"{where}: could not detect the format (known: {', '.join(names())})")
    reader, writer = get(src), get(dst)
    if lenient:
        got = reader.parse_lenient(text)
        calls, problems = got.calls, got.problems
    else:
        try:
            calls, problems = reader.parse_strict(text), []
        except FormatError as e:
            at = e.position  # (as :line:column, 1-based, when known)
            where += f":{text.count(chr(10), 0, at) + 1}:{at - text.rfind(chr(10), 0, at)}" if locate and at >= 0 else ""
            raise ConvertError(f"{where}: {e}") from None
    return Converted(writer.render(calls), src, len(calls), problems)


def convert_jsonl(
    lines: Iterable[str],
    src: str,
    dst: str,
    field_name: str,
    *,
    lenient: bool = False,
    source: str = "<stdin>",
    out_field: str | None = None,
) -> Iterator[tuple[dict, Converted]]:
    """For every JSONL record, its ``field_name`` converted and written to ``out_field`` (default: the same
    field). A field that is not a string (a JSON list of calls) is converted from its JSON text."""
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConvertError(f"{where}: not a JSON record: {e.msg} at column {e.colno}") from None
        if not isinstance(record, dict) or field_name not in record:
            raise ConvertError(f"{where}: record has no field {field_name!r}")
        value = record[field_name]
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        done = convert_text(text, src, dst, lenient=lenient, where=f"{where} field {field_name!r}", locate=False)
        record[out_field or field_name] = done.text
        yield record, done

