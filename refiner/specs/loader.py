"""``load_tools``: any tool list (Python objects or text, any dialect) → ``list[ToolSpec]``; ``detect_dialect``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from refiner.specs import text as spec_text
from refiner.specs.dialects import DIALECTS, describe, detect_one, spec_from_dict
from refiner.specs.model import SpecError, ToolSpec

# Keys of whole records that hold a tool list (LLaMA-Factory/xLAM ``tools``, BFCL ``function``, NesTools ``api``)
# or a system prompt with one (API-Bank, raw glaive, ToolACE ``system``).
RECORD_KEYS = ("tools", "functions", "function", "api", "system")


def _items(obj: Any, dialect: str | None) -> list[tuple[Any, str | None]]:
    """Flattens ``obj`` into (tool dict or ToolSpec, dialect forced by the container or None)."""
    if isinstance(obj, ToolSpec):
        return [(obj, None)]
    if isinstance(obj, bytes):
        obj = obj.decode("utf-8")
    if isinstance(obj, str):
        return _text_items(obj, dialect)
    if isinstance(obj, Mapping):
        if dialect is not None or detect_one(obj) is not None:
            return [(obj, dialect)]
        for key in RECORD_KEYS:
            if key in obj and not isinstance(obj.get("name"), str):
                return _items(obj[key], dialect)
        raise SpecError(None, f"cannot recognise the tool spec dialect of {describe(obj)}; known dialects: "
                        f"{', '.join(DIALECTS)}", tool=0)
    if isinstance(obj, (list, tuple)):
        out = []
        for i, item in enumerate(obj):
            if isinstance(item, ToolSpec):
                out.append((item, None))
            elif isinstance(item, Mapping):
                out.append((item, dialect))
            else:
                raise SpecError(dialect, f"a tool must be an object, got {describe(item)}", tool=i)
        return out
    raise SpecError(dialect, f"cannot read tool specs from {describe(obj)}")


def _text_items(text: str, dialect: str | None) -> list[tuple[Any, str | None]]:
    s = text.strip()
    if not s:
        return []
    if s[0] in "[{":
        try:
            value = spec_text.loads(s)
        except ValueError:
            value = None
        if value is not None:
            return _items(value, dialect)
    if dialect in (None, "apibank") and spec_text.is_apibank(s):
        return [(d, "apibank") for d in spec_text.apibank_tools(s)]
    found = spec_text.embedded_json(s)
    if found:
        glaive = spec_text.GLAIVE_MARKER in s or (len(found) > 1 and all(isinstance(v, dict) for v in found))
        forced = dialect or ("glaive" if glaive else None)
        out: list[tuple[Any, str | None]] = []
        for value in found:
            out.extend((d, forced) for d in (value if isinstance(value, list) else [value]))
        return out
    if any(m in s for m in spec_text.NO_TOOLS_MARKERS):
        return []
    raise SpecError(dialect, "no tool specs found in the text (not JSON, no API-Bank tool list, no tool objects "
                    f"inside): {s[:80]!r}")


def load_tools(obj: Any, dialect: str | None = None) -> list[ToolSpec]:
    """Normalises a tool list in any supported dialect (detected per tool unless ``dialect`` is given).

    ``obj`` may be a list of tool dicts (or ToolSpecs), one tool dict, a record holding a tool list under ``tools`` /
    ``functions`` / ``function`` / ``api`` / ``system``, or text: JSON, a glaive or ToolACE system prompt with JSON
    tools inside, or the API-Bank prompt. Raises :class:`SpecError` naming the dialect, tool and field."""
    if dialect is not None and dialect not in DIALECTS:
        raise SpecError(dialect, f"unknown dialect; known: {', '.join(DIALECTS)}")
    return [item if isinstance(item, ToolSpec) else spec_from_dict(item, forced, i)  # (forced None: it tells the dialect)
            for i, (item, forced) in enumerate(_items(obj, dialect))]


def detect_dialect(obj: Any) -> str:
    """The one dialect of ``obj`` (a tool, a tool list, a record or text); raises :class:`SpecError` when it cannot
    be recognised or the tools disagree."""
    items = _items(obj, None)
    if not items:
        if isinstance(obj, str) and any(m in obj for m in spec_text.NO_TOOLS_MARKERS):
            return "glaive"
        raise SpecError(None, "no tools to detect a dialect from")
    seen: dict[str, int] = {}
    for i, (item, forced) in enumerate(items):
        dl = forced or (item.dialect if isinstance(item, ToolSpec) else detect_one(item))
        if dl is None:
            raise SpecError(None, f"cannot recognise the tool spec dialect of {describe(item)}", tool=i)
        seen.setdefault(dl, i)
    if len(seen) > 1:
        raise SpecError(None, f"the tools mix dialects: {', '.join(f'{d} (first at tool {i})' for d, i in seen.items())}")
    return next(iter(seen))
