"""A tool's parameters schema, whatever valid JSON Schema it is written in, brought to the one shape the dialect
readers take: an ``object`` with ``properties`` (and ``required``). :func:`normalise` resolves local ``$ref``s, merges
``allOf``, unites a top-level ``anyOf`` / ``oneOf`` of objects (requiring what all of them require), and reads a
schema that names no properties but accepts others as free-form; each such reading leaves a note (the gate's ``spec``
warning), never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce
from typing import Any

from refiner.specs.types import MAX_DEPTH, parse_type

MAX_NODES = 4096  # schema nodes visited per tool (references expanded count again)
MAX_REF_DEPTH = 16  # references followed inside one another
TOO_DEEP = f"a schema nested more than {MAX_DEPTH} deep: the rest read as any value"  # (the note where one is cut)
_COMBINATORS = ("allOf", "anyOf", "oneOf")
_DEFS = ("$defs", "definitions")


class _Walk:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.nodes = 0
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        if message not in self.notes and len(self.notes) < 16:
            self.notes.append(message)

    def target(self, ref: str) -> Any:
        """The schema a local reference points at, or ``None``."""
        if ref == "#":
            return self.root
        if not ref.startswith("#/"):
            return None
        node: Any = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def resolve(self, node: Any, refs: tuple[str, ...] = (), depth: int = 0) -> Any:
        """``node`` with its references replaced and its ``allOf`` merged (to twice :data:`MAX_DEPTH` levels: a
        schema, or its list of schemas, counts one)."""
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self.note(f"a schema of more than {MAX_NODES} nodes: the rest read as any value")
            return {}
        if depth > 2 * MAX_DEPTH:
            self.note(TOO_DEEP)
            return {}
        if isinstance(node, bool):  # (boolean schemas stay: the readers take them where they may stand)
            return node
        if isinstance(node, list):
            return [self.resolve(v, refs, depth + 1) for v in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in refs or len(refs) >= MAX_REF_DEPTH:
                self.note(f"the recursive reference {ref[:80]!r} reads as any value where it repeats")
                target: Any = {}
            else:
                target = self.target(ref)
                if target is None:
                    self.note(f"the reference {ref[:80]!r} points at no schema here; read as any value")
                    target = {}
                else:
                    target = self.resolve(target, (*refs, ref), depth + 1)
            if isinstance(target, bool):
                target = {} if target else {"not": {}}
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return _merge(target, self._keys(rest, refs, depth)) if rest else target
        out = self._keys(node, refs, depth)
        if "allOf" in out and isinstance(out["allOf"], list) and all(isinstance(b, Mapping) for b in out["allOf"]):
            out = _merge(reduce(_merge, out.pop("allOf"), {}), out)
        return out

    def _keys(self, node: Mapping[str, Any], refs: tuple[str, ...], depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k in _DEFS:
                continue  # (read through the references that use them)
            if k in ("properties", "patternProperties") and isinstance(v, Mapping):
                out[k] = {name: self.resolve(s, refs, depth + 1) for name, s in v.items()}
            elif k in ("items", "additionalProperties", "not", "if", "then", "else", "contains") or k in _COMBINATORS:
                out[k] = self.resolve(v, refs, depth + 1)
            else:
                out[k] = v
        return out


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two schemas a value must both satisfy, as one: properties united (one named in both merged too), required
    united, any other keyword of ``b`` over ``a``'s."""
    out = dict(a)
    for k, v in b.items():
        if k == "properties" and isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _unite(out[k], v)
        elif k == "required" and isinstance(v, list) and isinstance(out.get(k), list):
            out[k] = list(dict.fromkeys([*out[k], *v]))
        else:
            out[k] = v
    return out


def _unite(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two ``properties`` maps as one, a property named in both merged."""
    props = dict(a)
    for name, s in b.items():
        old = props.get(name)
        props[name] = _merge(old, s) if isinstance(old, Mapping) and isinstance(s, Mapping) else s
    return props


def _is_object(schema: Mapping[str, Any]) -> bool:
    t = schema.get("type")
    if t is None:
        return "properties" in schema or "required" in schema
    if t == "object" or t == "dict":
        return True
    types = t if isinstance(t, list) else [t]
    return any(isinstance(x, str) and parse_type(x).type == "object" for x in types)


def _accepts_others(schema: Mapping[str, Any]) -> bool:
    extra = schema.get("additionalProperties")
    return extra is True or (isinstance(extra, Mapping) and extra != {"not": {}}) or "patternProperties" in schema


def is_json_schema(value: Any) -> bool:
    """Whether a parameters block is a JSON Schema to normalise first: a boolean schema, or an object that uses
    ``$ref``, ``allOf`` / ``anyOf`` / ``oneOf`` (a list of schemas) or definitions at its top."""
    if isinstance(value, bool):
        return True
    if not isinstance(value, Mapping):
        return False
    if isinstance(value.get("$ref"), str) or any(isinstance(value.get(k), Mapping) for k in _DEFS):
        return True
    return any(isinstance(value.get(k), list) and all(isinstance(b, (Mapping, bool)) for b in value[k])
               for k in _COMBINATORS)


_REWRITTEN = frozenset(("$ref", "allOf", "anyOf", "oneOf", "$defs", "definitions", "patternProperties"))


def plain_schema(schema: Mapping[str, Any]) -> bool:
    """Whether a schema needs no rewriting: an object with properties, and no reference, combinator, boolean schema
    or open-ended properties anywhere (at most :data:`MAX_NODES` nodes looked at)."""
    if schema.get("type") not in ("object", "dict"):
        return False
    props = schema.get("properties")
    if type(props) is not dict and not isinstance(props, Mapping):
        return False
    stack: list[Any] = [schema]
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            return False
        if type(node) is not dict:  # (a dict told first: the ABC check is slower)
            if isinstance(node, bool):
                return False
            if not isinstance(node, Mapping):
                continue
        if not _REWRITTEN.isdisjoint(node):
            return False
        extra = node.get("additionalProperties")
        if extra is not None and extra is not False:
            return False
        props = node.get("properties")
        if props is not None and (type(props) is dict or isinstance(props, Mapping)):
            stack.extend(props.values())
        items = node.get("items")
        if items is not None:
            stack.append(items)
    return True


def normalise(schema: Any) -> tuple[Any, list[str], bool]:
    """``(schema, notes, free_form)``: the parameters schema with its references resolved and its combinators
    merged (see the module docstring); the notes say what was read otherwise than as written; ``free_form``: the
    tool takes any arguments. A value that is not a schema is returned as it is (the dialect reader reports it)."""
    if type(schema) is dict or isinstance(schema, Mapping):  # (a dict told first: the ABC check is slower)
        if plain_schema(schema):  # (the common case: read as it is)
            return schema, [], False
    elif not isinstance(schema, bool):
        return schema, [], False
    walk = _Walk(schema)
    out = walk.resolve(schema)
    if out is True:
        out = {}
    if out is False or out == {"not": {}}:
        walk.note("the parameters schema is false: no argument is valid")
        return {"type": "object", "properties": {}, "additionalProperties": False}, walk.notes, False
    free = False
    alts = [k for k in ("anyOf", "oneOf") if isinstance(out.get(k), list)]
    for key in alts:
        branches = [b for b in out[key] if isinstance(b, Mapping)]
        if len(branches) != len(out[key]) or not all(_is_object(b) or not b.get("type") for b in branches):
            walk.note(f"top-level {key} whose alternatives are not all objects: parameters read as free-form")
            free = True
            continue
        out.pop(key)
        united = reduce(_unite, (b.get("properties") or {} for b in branches), {})
        common = None
        for b in branches:
            req = [r for r in (b.get("required") or []) if isinstance(r, str)]
            common = req if common is None else [r for r in common if r in req]
        out = _merge(out, {"properties": united, "required": common or []})
        out.setdefault("type", "object")
        if any(_accepts_others(b) for b in branches):
            free = True
        names = [sorted(b.get("properties") or {})[:4] or sorted(b.get("required") or [])[:4] for b in branches]
        walk.note(f"top-level {key}: {len(branches)} alternative parameter sets ({'; '.join(map(str, names))}) "
                  f"read as one, requiring only what all of them require")
    if not _is_object(out) and not free:
        t = out.get("type")
        if t is None and not out.get("properties"):
            if out:  # (an empty schema or true: any object)
                walk.note("the parameters schema names no type and no properties: parameters read as free-form")
            free = True
            out = {**out, "type": "object"}
        elif t is not None:
            walk.note(f"the parameters schema is of type {t!r}, not an object: parameters read as free-form")
            free = True
            out = {k: v for k, v in out.items() if k not in ("type", "items", "enum")} | {"type": "object"}
    if not free and not out.get("properties") and _accepts_others(out):
        walk.note("the parameters schema names no properties and accepts any: parameters read as free-form")
        free = True
    if free:
        out = dict(out)
        out.setdefault("properties", {})
    return out, walk.notes, free
