"""Reading the test corpora (``tests/corpus/*/*.jsonl``): one JSON object per line, checked field by field, so a
malformed row stops the run with its file, line and field. Used by ``dialect_corpus.py`` and ``salvage_corpus.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path


def read_rows(
    directory: Path, fields: Sequence[tuple[str, type]], kinds: Sequence[str] | None
) -> Iterator[tuple[str, dict]]:
    """``(where, record)`` for every non-blank line of every ``*.jsonl`` file in ``directory`` (sorted by name), where
    ``where`` is ``"file.jsonl:line"``. Raises ``ValueError`` naming the place when a line is not JSON, a field of
    ``fields`` is missing or not of its type, or ``kind`` is not one of ``kinds`` (``None``: rows have no kind)."""
    for path in sorted(directory.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path.name}:{n}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{where}: not JSON ({e.msg})") from None
            for key, typ in fields:
                if not isinstance(obj.get(key), typ):
                    raise ValueError(f"{where}: field {key!r} missing or not a {typ.__name__}")  # noqa: TRY004
            if kinds is not None and obj["kind"] not in kinds:
                raise ValueError(f"{where}: field 'kind' must be one of {tuple(kinds)}, got {obj['kind']!r}")
            yield where, obj
