"""Type texts from every dialect (JSON Schema, Python and typing names, Java names, prose such as ``int or float``,
xLAM's ``str, optional``) read into a :class:`TypeInfo` in the JSON Schema vocabulary by :func:`parse_type`; a text
not recognised gives an unknown type (``None``), never an error.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from typing import Any

MAX_DEPTH = 32  # nesting of a parameter schema read (deeper: any value), and of a value the gate checks against it

JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")

# Lower-cased simple names → JSON Schema type (None: any value).
_SIMPLE: dict[str, str | None] = {
    "string": "string", "str": "string", "char": "string", "character": "string", "text": "string",
    "bytes": "string", "date": "string", "datetime": "string", "time": "string", "file": "string",
    "url": "string", "uuid": "string",
    "integer": "integer", "int": "integer", "long": "integer", "short": "integer", "byte": "integer",
    "bigint": "integer",
    "number": "number", "float": "number", "double": "number", "decimal": "number", "numeric": "number",
    "boolean": "boolean", "bool": "boolean",
    "array": "array", "list": "array", "tuple": "array", "set": "array", "sequence": "array",
    "arraylist": "array", "iterable": "array", "frozenset": "array",
    "object": "object", "dict": "object", "dictionary": "object", "map": "object", "hashmap": "object",
    "mapping": "object", "json": "object",
    "null": "null", "none": "null", "nonetype": "null",
    "any": None, "enum": None, "callable": None, "function": None,
}

# Generic containers: ``Name[args]`` / ``Name(args)`` / ``Name<args>``.
_ARRAYS = {name for name, t in _SIMPLE.items() if t == "array"}
_OBJECTS = {"dict", "mapping", "map", "hashmap", "object"}
_NOT_SIMPLE = object()
_STRING_FORMATS = {"date": "date", "datetime": "date-time", "time": "time", "uuid": "uuid", "url": "uri"}


@dataclass
class TypeInfo:
    """What a type text says: the JSON type (None = unknown/any), item type for arrays, and the modifiers."""

    type: str | None = None
    items: TypeInfo | None = None
    nullable: bool = False
    optional: bool = False  # xLAM ", optional": the parameter may be left out
    enum: list[Any] | None = None
    format: str | None = None
    known: bool = True  # False when the text (or part of it) was not recognised


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Splits at ``sep`` outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "[(<{":
            depth += 1
        elif ch in "])>}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


_GENERIC = re.compile(r"^([A-Za-z_][\w.]*)\s*[\[(<](.*)[\])>]$", re.DOTALL)
_OR = re.compile(r"\s+or\s+|\s*\|\s*", re.IGNORECASE)


def json_type_of(
    value: Any, *, arrays: tuple[type, ...] = (list, tuple), objects: tuple[type, ...] = (dict,)
) -> str | None:
    """The JSON Schema type name of a Python value (``bool`` is ``boolean``, not ``integer``); instances of
    ``arrays`` are ``array`` and of ``objects`` are ``object``; None for anything else."""
    if value is None:
        return "null"
    for kinds, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (arrays, "array"),
                        (objects, "object")):
        if isinstance(value, kinds):
            return name
    return None


def type_of_values(values: list[Any]) -> str | None:
    """The one JSON type all ``values`` share (``integer`` widens to ``number``), else None."""
    types = {json_type_of(v) for v in values}
    types.discard("null")
    return "number" if types == {"integer", "number"} else types.pop() if len(types) == 1 else None


def union(members: list[TypeInfo]) -> TypeInfo:
    """The type a value of any of ``members`` has: their one JSON type (``integer`` within ``number``), nullable when
    one of them is ``null`` or nullable; no type when they differ."""
    nullable = any(m.type == "null" or m.nullable for m in members)
    rest = [m for m in members if m.type != "null"]
    known = all(m.known for m in members)
    types = {m.type for m in rest}
    if not rest:
        return TypeInfo("null", nullable=True, known=known)
    if len(rest) == 1:
        return replace(rest[0], nullable=nullable, optional=False, known=known)
    if len(types) == 1 and None not in types:
        t = types.pop()
        items = rest[0].items if all(m.items == rest[0].items for m in rest) else None
        return TypeInfo(t, items, nullable, known=known)
    return TypeInfo("number" if types <= {"integer", "number"} else None, nullable=nullable, known=known)


def parse_type(text: str, depth: int = 0) -> TypeInfo:
    """Reads one type text (any dialect) into a :class:`TypeInfo`; never raises. Types nested more than
    :data:`MAX_DEPTH` deep in it are read as unknown."""
    simple = _SIMPLE.get(text, _NOT_SIMPLE)
    if simple is not _NOT_SIMPLE:  # (most type texts: a bare JSON or Python type name, read as below, sooner)
        return TypeInfo(simple, format=_STRING_FORMATS.get(text))
    if depth > MAX_DEPTH:
        return TypeInfo(None, known=False)
    text = text.strip()
    parts = _split_top(text, ",")
    if len(parts) > 1 and parts[0]:
        info = parse_type(parts[0], depth)
        info.optional = info.optional or any(mod.lower() == "optional" for mod in parts[1:])
        return info
    alts = [a for a in _OR.split(text) if a] if _OR.search(text) and not _GENERIC.match(text) else []
    if len(alts) > 1:
        return union([parse_type(a, depth) for a in alts])
    m = _GENERIC.match(text)
    return _parse_generic(m.group(1), m.group(2), depth + 1) if m else _parse_simple(text, depth + 1)


def _parse_simple(text: str, depth: int) -> TypeInfo:
    low = text.lower().strip()
    low = low.rsplit(".", 1)[-1] if low.startswith(("typing.", "datetime.", "java.")) else low
    if low in _SIMPLE:
        return TypeInfo(_SIMPLE[low], format=_STRING_FORMATS.get(low))
    # "list of float", "array of strings"
    of = re.match(r"^([A-Za-z_]+)\s+of\s+(.+)$", text)
    if of and of.group(1).lower() in _ARRAYS:
        inner = parse_type(of.group(2), depth)
        if not inner.known and of.group(2).endswith("s"):  # plural: "list of floats"
            inner = parse_type(of.group(2)[:-1], depth)
        return TypeInfo("array", items=inner if inner.known else None, known=inner.known)
    # prose with a parenthesised note, e.g. "Date (yyyy-mm-dd)"
    head = re.match(r"^([A-Za-z_]+)\s*\(", text)
    if head and head.group(1).lower() in _SIMPLE:
        return _parse_simple(head.group(1), depth)
    return TypeInfo(None, known=False)


def _parse_generic(base: str, args_text: str, depth: int) -> TypeInfo:
    low = base.lower().rsplit(".", 1)[-1]
    args = [a for a in _split_top(args_text, ",") if a] if args_text.strip() else []
    if low == "optional" and len(args) == 1:
        inner = parse_type(args[0], depth)
        inner.nullable = True
        return inner
    if low == "union" and args:
        return union([parse_type(a, depth) for a in args])
    if low == "literal" and args:
        try:
            values = list(ast.literal_eval(f"({args_text},)"))
        except (ValueError, SyntaxError):
            return TypeInfo(None, known=False)
        return TypeInfo(type_of_values(values), enum=values)
    if low in _ARRAYS:
        elems = [a for a in args if a != "..."]
        if not elems:
            return TypeInfo("array")
        infos = [parse_type(a, depth) for a in elems]
        first = infos[0]
        same = all(i.type == first.type and i.items == first.items for i in infos)
        item = first if same else None
        return TypeInfo("array", items=item, known=all(i.known for i in infos))
    if low in _OBJECTS:
        return TypeInfo("object", known=all(parse_type(a, depth).known for a in args))
    if low in _SIMPLE:  # e.g. "list(str)" handled above; "str(...)" prose
        return _parse_simple(low, depth)
    return TypeInfo(None, known=False)
