"""Reading one tool dict of any dialect into a :class:`ToolSpec` (:func:`spec_from_dict`), and telling the dialects
apart (:func:`detect_one`). The dialects, as named in errors and ``ToolSpec.dialect``:

- ``jsonschema`` (``name``, ``description``, ``parameters``), ``openai`` (that inside ``{"type": "function",
  "function": ...}``), ``anthropic`` (``input_schema``), ``mcp`` (``inputSchema``, ``outputSchema``): any valid JSON
  Schema (:mod:`refiner.specs.schema`), at worst read as free-form parameters with a note, never refused.
- ``toolace`` / ``bfcl``: ``"type": "dict"`` with Python-ish or Java type names (ToolACE's ``required`` may sit at the
  tool level).
- ``xlam``: ``parameters`` maps names to ``{"type": "str, optional", ...}``; required unless its type says optional.
- ``nestools``: ``api_name``, ``api_description``, ``parameters``, ``required``, ``responses`` (the outputs).
- ``nestful``: ``query_parameters`` / ``path_parameters`` / ``parameters`` / ``arguments`` with per-parameter
  ``required`` flags, ``allowed_values`` / ``possible_values`` / ``default_value``, ``output_parameters``.
- ``apibank``: parameter dicts from the API-Bank prompt text, every parameter required.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from refiner.specs.model import Param, SpecError, ToolSpec
from refiner.specs.schema import MAX_DEPTH, TOO_DEEP, is_json_schema, normalise
from refiner.specs.types import TypeInfo, parse_type, type_of_values, union

DIALECTS = (
    "jsonschema", "openai", "anthropic", "mcp", "glaive", "toolace", "bfcl", "xlam", "nestools", "nestful", "apibank",
)

# Dialects where a parameter with no required marker is required unless its type says optional.
_REQUIRED_UNLESS_OPTIONAL = ("xlam", "apibank")

_SCHEMA_KEYS = {"type", "properties", "required", "additionalProperties", "description", "title", "$schema",
                "definitions", "$defs"}
_PARAM_KEYS = {"type", "description", "enum", "allowed_values", "possible_values", "default", "default_value", "items",
               "properties", "required", "minimum", "maximum", "pattern", "minLength", "maxLength", "min_length",
               "max_length", "nullable", "format", "optional", "anyOf", "oneOf"}
_TOOL_KEYS = {"name", "api_name", "description", "api_description", "parameters", "input_schema", "query_parameters",
              "path_parameters", "arguments", "required", "responses", "output_parameters", "output_parameter",
              "inputSchema", "outputSchema"}
_WRAPPER_KEYS = frozenset(("type", "function"))  # an OpenAI tool's own keys around its function
_BLOCKS = {  # the keys holding a tool's parameters, where not just "parameters"
    "anthropic": ("input_schema", "parameters"), "mcp": ("inputSchema", "parameters"),
    "nestful": ("parameters", "path_parameters", "query_parameters", "arguments"),
}
_PYTHONISH = {"int", "str", "list", "bool"}
_SCALARS = frozenset((str, int, float, bool, type(None)))  # (told by type first: the Mapping check is slow on them)
_RANGE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:-|to|\.\.)\s*(-?\d+(?:\.\d+)?)\s*$")


class Ctx:
    """Where we are, for error messages; and what the schema reader read otherwise than as written (``notes``), and
    whether the parameters are free-form."""

    __slots__ = ("depth", "dialect", "free_form", "index", "name", "notes")

    def __init__(self, dialect: str, index: int | None, name: str | None) -> None:
        self.dialect, self.index, self.name = dialect, index, name
        self.depth = 0  # (of the parameter read_param reads)
        self.notes: list[str] = []
        self.free_form: list[bool] = []

    def error(self, field: str, message: str) -> SpecError:
        return SpecError(self.dialect, message, tool=self.index, name=self.name, field=field)


def is_schema_object(value: Mapping[str, Any]) -> bool:
    """A JSON Schema ``object`` (``{"type": "object", "properties": ...}``) rather than a name → parameter map.

    A parameter map can hold a parameter *named* ``type`` or ``properties``; its value is then a dict, not a string.
    A schema written with ``$ref``, ``allOf`` / ``anyOf`` / ``oneOf`` or a type list at its top is one too."""
    if isinstance(value.get("type"), str) or is_json_schema(value):
        return True
    if isinstance(value.get("type"), list) and value["type"] and all(isinstance(t, str) for t in value["type"]):
        return True
    props = value.get("properties")
    if not isinstance(props, Mapping) or not set(value) <= _SCHEMA_KEYS:
        return False
    # {"properties": {"type": "list", "description": ...}} is one parameter *named* "properties"
    return not (props and set(props) <= _PARAM_KEYS and any(not isinstance(v, Mapping) for v in props.values()))


def describe(obj: Any) -> str:
    """What a value that is no tool is, for an error message."""
    if isinstance(obj, Mapping):
        return f"an object with keys {sorted(map(str, obj))[:12]}"
    return f"a {type(obj).__name__}"


def _checked(ctx: Ctx, path: str, key: str, value: Any, kinds: type | tuple[type, ...], what: str) -> Any:
    """``value`` when it is None or of ``kinds`` (never a bool), else the error saying it must be ``what``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
        raise ctx.error(f"{path}.{key}", f"must be {what}, got {value!r}")
    return value


def _names(ctx: Ctx, path: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ctx.error(path, f"must be a list of parameter names, got {value!r}")
    return tuple(dict.fromkeys(value))


def _param_from_typeinfo(info: TypeInfo) -> Param:
    items = _param_from_typeinfo(info.items) if info.items is not None else None
    return Param.of(type=info.type, items=items, nullable=info.nullable, enum=info.enum, format=info.format)


def _read_type(ctx: Ctx, path: str, value: Any) -> tuple[TypeInfo, str | None]:
    """(TypeInfo, raw text) from a ``type`` value: a type text, a JSON Schema type list, or absent."""
    if value is None:
        return TypeInfo(None), None
    if isinstance(value, str):
        info = parse_type(value)
        return info, (None if value == info.type else value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        infos = [parse_type(v) for v in value]
        several = sum(i.type != "null" for i in infos) > 1
        return union(infos), ("|".join(value) if several else None)
    raise ctx.error(path, f"a type must be a string or a list of strings, got {value!r}")


def _enum_like(ctx: Ctx, path: str, value: Any, kw: dict[str, Any], extra: dict[str, Any], key: str) -> None:
    """``enum`` / ``allowed_values`` / ``possible_values``: a list of values, or a range text like ``"1-100"``."""
    if value is None:
        return
    if isinstance(value, (list, tuple)):
        if value or key == "enum":
            kw.setdefault("enum", tuple(value))
        return
    if isinstance(value, str):
        m = _RANGE.match(value)
        if m:
            lo, hi = (float(x) if "." in x else int(x) for x in m.groups())
            kw.setdefault("minimum", lo)
            kw.setdefault("maximum", hi)
            return
        extra[key] = value
        return
    raise ctx.error(f"{path}.{key}", f"must be a list of values, got {value!r}")


_PLAIN_KEYS = frozenset(("type", "description", "enum", "default", "items", "properties", "required", "nullable", "anyOf"))
_PLAIN_TYPES = frozenset(("string", "integer", "number", "boolean", "object", "array"))
_STR = frozenset((str,))
_NULL = {"type": "null"}


def _plain_param(value: Any, depth: int = 0) -> Param | None:
    """The parameter a plain schema says, as :func:`read_param` reads it (else ``None``): a dict of a plain JSON type
    (or, nullable, it and ``"null"`` in a list, or ``anyOf`` a plain schema and null: its type, items and properties)
    with at most a description, a ``nullable`` flag, scalar values, a scalar default, plain items and properties and
    a list of required names, nested at most :data:`~refiner.specs.types.MAX_DEPTH` deep."""
    if type(value) is not dict or not value.keys() <= _PLAIN_KEYS or depth > MAX_DEPTH:
        return None
    ptype, desc, nullable = value.get("type"), value.get("description"), value.get("nullable")
    if desc is not None and type(desc) is not str or nullable is not None and type(nullable) is not bool:
        return None
    enum, items, props, required = value.get("enum"), value.get("items"), value.get("properties"), value.get("required")
    if "anyOf" in value:  # [X, {"type": "null"}] (either order), X plain, in place of the type, items and properties
        alts = value["anyOf"]
        if (ptype, items, props, required) != (None,) * 4 or type(alts) is not list or len(alts) != 2 or _NULL not in alts:
            return None
        if (base := _plain_param(alts[alts[0] == _NULL], depth)) is None:
            return None
        ptype, items, props, required, nullable = base.type, base.items, base.properties, base.required, True
    else:
        if type(ptype) is list and len(ptype) == 2 and "null" in ptype:  # [T, "null"]: a nullable T
            ptype, nullable = ptype[ptype[0] == "null"], True
        if type(ptype) is not str or ptype not in _PLAIN_TYPES:
            return None
        if items is not None and (items := _plain_param(items, depth + 1)) is None:
            return None
        if props is not None:
            props = {key: _plain_param(child, depth + 1) for key, child in props.items()} if type(props) is dict else None
            if props is None or any(child is None for child in props.values()):
                return None
        if required is not None:
            if type(required) is not list or not _STR.issuperset(map(type, required)):
                return None
            required = tuple(dict.fromkeys(required))
    if enum is not None:
        if type(enum) is not list and type(enum) is not tuple or not _SCALARS.issuperset(map(type, enum)):
            return None
        enum = tuple(enum)
    if "default" in value and type(value["default"]) not in _SCALARS:
        return None
    return Param.plain(ptype, desc, enum, items, props, required, nullable, value.get("default"), "default" in value)


def read_param(ctx: Ctx, path: str, value: Any) -> tuple[Param, bool | None, bool]:
    """One parameter schema (a dict, or a bare type text) → (Param, its own required flag if it states one,
    whether it says it is optional)."""
    plain = _plain_param(value, ctx.depth)  # (most parameters: the general reader's result, sooner)
    if plain is not None:
        return plain, None, False
    if ctx.depth > MAX_DEPTH:
        ctx.notes += [] if TOO_DEEP in ctx.notes else [TOO_DEEP]
        return Param(), None, False
    ctx.depth += 1  # (a SpecError raised below ends the tool's reading, and its Ctx with it)
    got = _read_param(ctx, path, value)
    ctx.depth -= 1
    return got


def _read_param(ctx: Ctx, path: str, value: Any) -> tuple[Param, bool | None, bool]:
    """:func:`read_param` of a parameter that is not plain, at a depth it reads."""
    if isinstance(value, str):
        info, raw = _read_type(ctx, path, value)
        p = _param_from_typeinfo(info)
        return replace(p, raw_type=raw), None, info.optional
    if isinstance(value, bool):  # a boolean schema: true is any value, false none
        return (Param() if value else Param(extra={"not": {}})), None, False
    if not isinstance(value, Mapping):
        raise ctx.error(path, f"a parameter must be an object or a type name, got {type(value).__name__}")
    info, raw = _read_type(ctx, f"{path}.type", value.get("type"))
    kw: dict[str, Any] = {}
    extra: dict[str, Any] = {k: v for k, v in value.items() if k not in _PARAM_KEYS}
    typed_items = _param_from_typeinfo(info.items) if info.items is not None else None

    desc = value.get("description")
    if desc is not None and not isinstance(desc, str):
        raise ctx.error(f"{path}.description", f"must be a string, got {type(desc).__name__}")
    for key in ("enum", "allowed_values", "possible_values"):
        _enum_like(ctx, path, value.get(key), kw, extra, key)
    if "const" in value and "enum" not in kw:
        kw["enum"] = (value["const"],)
    if "enum" not in kw and info.enum is not None:
        kw["enum"] = info.enum
    for key in ("default", "default_value"):
        if key in value:
            kw["default"], kw["has_default"] = value[key], True
            break

    items = value.get("items")
    if isinstance(items, (Mapping, str, bool)):
        kw["items"] = read_param(ctx, f"{path}.items", items)[0]
    elif isinstance(items, list):
        extra["items"] = items  # tuple validation: kept verbatim
    elif items is not None:
        raise ctx.error(f"{path}.items", f"must be an object, got {type(items).__name__}")
    elif typed_items is not None:
        kw["items"] = typed_items

    props = value.get("properties")
    required_flags: list[str] = []
    if props is not None:
        if not isinstance(props, Mapping):
            raise ctx.error(f"{path}.properties", f"must be an object, got {type(props).__name__}")
        children = {}
        for k, v in props.items():
            child, flag, _ = read_param(ctx, f"{path}.properties.{k}", v)
            children[k] = child
            if flag:
                required_flags.append(k)
        kw["properties"] = children

    req = value.get("required")
    own_flag = _boolish(req)
    if own_flag is None and req is not None:
        kw["required"] = _names(ctx, f"{path}.required", req) + tuple(r for r in required_flags if r not in req)
    if "required" not in kw and required_flags:
        kw["required"] = tuple(required_flags)

    opt = value.get("optional")
    if opt is not None and _boolish(opt) is None:
        raise ctx.error(f"{path}.optional", f"must be true or false, got {opt!r}")
    optional = info.optional or bool(_boolish(opt))

    nullable = value.get("nullable")
    if nullable is not None and not isinstance(nullable, bool):
        raise ctx.error(f"{path}.nullable", f"must be true or false, got {nullable!r}")

    base: Param | None = None  # the type's own reading, when alternatives change it
    for alt_key in ("anyOf", "oneOf"):
        alts = value.get(alt_key)
        if alts is None:
            continue
        merged = _nullable_alternative(ctx, f"{path}.{alt_key}", alts)
        if merged is not None and info.type is None and not kw.get("properties") and "items" not in kw:
            base = merged
        else:
            extra[alt_key] = alts
            if merged is None and info.type is None:  # several alternatives: the one type they share, if any
                base = replace(base or _param_from_typeinfo(info), **_alternatives_type(ctx, f"{path}.{alt_key}", alts))
    if base is None:
        base = _param_from_typeinfo(info)
    ptype = base.type

    # "type": "Enum", or a NESTFUL (SGD) parameter with no type: the listed values say it
    untyped = value.get("type") is None and ctx.dialect == "nestful"
    if ptype is None and kw.get("enum") and (untyped or "const" in value or str(value.get("type")).lower() == "enum"):
        ptype = type_of_values(list(kw["enum"]))
    fmt = _checked(ctx, path, "format", value.get("format"), str, "a string")
    p = Param.of(
        type=ptype,
        enum=kw.get("enum"),
        default=kw.get("default"),
        has_default=kw.get("has_default", False),
        description=desc,
        items=kw.get("items", base.items),
        properties=kw.get("properties", dict(base.properties)),
        required=kw.get("required", base.required),
        minimum=_checked(ctx, path, "minimum", value.get("minimum", kw.get("minimum")), (int, float), "a number"),
        maximum=_checked(ctx, path, "maximum", value.get("maximum", kw.get("maximum")), (int, float), "a number"),
        pattern=_checked(ctx, path, "pattern", value.get("pattern"), str, "a string"),
        min_length=_checked(ctx, path, "minLength", value.get("minLength", value.get("min_length")), int, "an integer"),
        max_length=_checked(ctx, path, "maxLength", value.get("maxLength", value.get("max_length")), int, "an integer"),
        nullable=bool(nullable) or base.nullable,
        format=fmt if fmt is not None else base.format,
        extra=extra,
        raw_type=raw,
    )
    return p, own_flag, optional


def _alternatives_type(ctx: Ctx, path: str, alts: list[Any]) -> dict[str, Any]:
    """The type a value of any of ``alts`` has (:func:`refiner.specs.types.union`); no type when they differ."""
    params = [read_param(ctx, f"{path}.{i}", a)[0] for i, a in enumerate(alts)]
    one = union([TypeInfo(p.type, nullable=p.nullable) for p in params])
    return {"type": one.type, "nullable": one.nullable} if one.type not in (None, "null") else {}


def _nullable_alternative(ctx: Ctx, path: str, alts: Any) -> Param | None:
    """``anyOf: [X, {"type": "null"}]`` → X made nullable; anything else → None (kept verbatim by the caller)."""
    if isinstance(alts, list):
        alts = [({} if a else {"not": {}}) if isinstance(a, bool) else a for a in alts]
    if not isinstance(alts, list) or not all(isinstance(a, Mapping) for a in alts):
        raise ctx.error(path, "must be a list of schemas")
    rest = [a for a in alts if a.get("type") != "null"]
    if len(rest) != 1 or len(alts) != 2:
        return None
    p = read_param(ctx, f"{path}.0", rest[0])[0]
    return replace(p, nullable=True)


_TRUE, _FALSE = {"true", "yes"}, {"false", "no"}


def _boolish(value: Any) -> bool | None:
    """True/False, also written as text ("true", "True", "yes", "no"); None for anything else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        return True if low in _TRUE else False if low in _FALSE else None
    return None


def read_param_map(ctx: Ctx, path: str, value: Any, implicit: bool = False) -> tuple[dict[str, Param], tuple[str, ...]]:
    """A parameters block (JSON Schema object, or a name → parameter map) → (params, required names); ``implicit``:
    a parameter with no required marker is required unless it says it is optional."""
    if value is None:
        return {}, ()
    if isinstance(value, bool):
        value = {"type": "object"} if value else {"type": "object", "properties": {}, "additionalProperties": False}
        if value.get("additionalProperties") is not False:
            ctx.notes.append(f"{path}: the parameters schema is true: parameters read as free-form")
            ctx.free_form.append(True)
    if type(value) is not dict and not isinstance(value, Mapping):  # (a dict told first: the ABC check is slower)
        raise ctx.error(path, f"must be an object, got {type(value).__name__}")
    explicit: tuple[str, ...] | None = None
    if is_schema_object(value):
        value, notes, free_form = normalise(value)
        if notes:
            ctx.notes.extend(f"{path}: {n}" for n in notes)
        if free_form:
            ctx.free_form.append(True)
        if value.get("type") != "object":  # (the usual type needs no reading)
            info, _ = _read_type(ctx, f"{path}.type", value.get("type"))
            if info.type not in (None, "object"):
                raise ctx.error(f"{path}.type", f"the parameters schema must be an object, got {value.get('type')!r}")
        props = {} if value.get("properties") is None else value["properties"]
        if type(props) is not dict and not isinstance(props, Mapping):
            raise ctx.error(f"{path}.properties", f"must be an object, got {type(props).__name__}")
        if value.get("required") is not None:
            explicit = _names(ctx, f"{path}.required", value["required"])
        path = f"{path}.properties"
    else:
        props = value
    params: dict[str, Param] = {}
    required: list[str] = []
    for name, spec in props.items():
        p, flag, optional = read_param(ctx, f"{path}.{name}", spec)
        params[name] = p
        if flag is None:  # no marker of its own
            flag = implicit and explicit is None and not optional
        if flag:
            required.append(name)
    if explicit is not None:
        return params, explicit + tuple(r for r in required if r not in explicit)
    return params, tuple(required)


def _types_in(params: Any) -> set[str]:
    """The type texts used anywhere in a parameters block (for dialect detection)."""
    found: set[str] = set()
    stack = [params]
    while stack:  # (a node is told by its type first: the Mapping check is a slow Python call)
        cur = stack.pop()
        kind = type(cur)
        if kind is dict or (kind is not list and kind not in _SCALARS and isinstance(cur, Mapping)):
            t = cur.get("type")
            if type(t) is str:
                found.add(t)
            for v in cur.values():
                kind = type(v)
                if kind is dict or kind is list or (kind not in _SCALARS and isinstance(v, (Mapping, list))):
                    stack.append(v)
        elif kind is list or isinstance(cur, list):
            stack.extend(cur)
    return found


def detect_one(d: Any) -> str | None:
    """The dialect of one tool dict, or None when it matches none."""
    if not (type(d) is dict or isinstance(d, Mapping)):
        return None
    fn = d.get("function")
    if fn is not None and isinstance(fn, (dict, Mapping)) and ("name" in fn or d.get("type") == "function"):
        return "openai"
    if "api_name" in d:
        return "nestools"
    if not isinstance(d.get("name"), str):
        return None
    if "input_schema" in d:
        return "anthropic"
    if "inputSchema" in d:
        return "mcp"
    params = d.get("parameters")
    mapping = type(params) is dict or (params is not None and isinstance(params, Mapping))
    schema = mapping and is_schema_object(params)
    args = d.get("arguments")
    if "query_parameters" in d or "path_parameters" in d or "output_parameter" in d or isinstance(args, Mapping):
        return "nestful"
    if mapping and params and not schema:
        return "nestful" if "output_parameters" in d else "xlam"
    if schema:
        if "required" in d or {t.strip().lower() for t in _types_in(params)} & _PYTHONISH:
            return "toolace"
        if str(params.get("type")).lower() == "dict":
            return "bfcl"
    return "jsonschema"


def _str_field(ctx: Ctx, d: Mapping[str, Any], *keys: str, required: bool = False) -> str | None:
    for k in keys:
        if k in d and d[k] is not None:
            if not isinstance(d[k], str):
                raise ctx.error(k, f"must be a string, got {type(d[k]).__name__}")
            return d[k]
    if required:
        raise ctx.error(keys[0], "is missing")
    return None


_PLAIN_TOOL_KEYS = frozenset(("name", "description", "parameters"))
_PLAIN_SCHEMA_KEYS = frozenset(("type", "properties", "required", "additionalProperties"))
_PLAIN_DIALECTS = frozenset(("openai", "jsonschema"))


def _plain_spec(d: Any, dialect: str | None) -> ToolSpec | None:
    # A second reader beside _read_spec, for speed (bench_refine_peer shows it); tests/test_specs.py checks they agree.
    """The spec of the common plain tool (``{"name", "description", "parameters": {"type": "object", "properties":
    {...}, "required": [...]}}``, maybe in OpenAI's ``{"type": "function", "function": ...}``, every parameter a
    plain one: :func:`_plain_param`), as :func:`spec_from_dict` reads it; ``None`` for any other tool. ``dialect``
    None: the one :func:`detect_one` gives: ``openai`` in its wrapper, else ``jsonschema``."""
    fn = d.get("function")
    if type(fn) is dict and "name" not in d:
        if not d.keys() <= _WRAPPER_KEYS:
            return None
        d, dialect = fn, dialect or "openai"
    if not d.keys() <= _PLAIN_TOOL_KEYS:
        return None
    name, description, schema = d.get("name"), d.get("description"), d.get("parameters")
    if type(name) is not str or not name or (description is not None and type(description) is not str):
        return None
    extra: dict[str, Any] = {}
    params: dict[str, Param] = {}
    required: tuple[str, ...] = ()
    if schema is not None:
        if type(schema) is not dict or not schema.keys() <= _PLAIN_SCHEMA_KEYS or schema.get("type") != "object":
            return None
        closed = schema.get("additionalProperties")
        if closed is False:
            extra["additionalProperties"] = False
        elif closed is not None:
            return None
        props, req = schema.get("properties"), schema.get("required")
        if type(props) is not dict or (req is not None and (type(req) is not list or not _STR.issuperset(map(type, req)))):
            return None
        for key, value in props.items():
            if (p := _plain_param(value)) is None:
                return None
            params[key] = p
        if req is not None:
            required = tuple(dict.fromkeys(req))
    return ToolSpec.plain(name, description or "", params, required, dialect or "jsonschema", extra)


def spec_from_dict(d: Any, dialect: str | None, index: int | None = None) -> ToolSpec:
    """One tool dict in ``dialect`` (None: the one :func:`detect_one` tells, which a plain tool's shape tells:
    :func:`_plain_spec`) → :class:`ToolSpec`; raises :class:`SpecError` naming the tool and field."""
    plain = dialect is None or dialect in _PLAIN_DIALECTS
    spec = _plain_spec(d, dialect) if plain and type(d) is dict else None
    if spec is None and dialect is None:
        dialect = detect_one(d)
        if dialect is None:
            raise SpecError(None, f"cannot recognise the tool spec dialect of {describe(d)}; known dialects: "
                            f"{', '.join(DIALECTS)}", tool=index)
        if dialect != "openai":  # (an OpenAI tool has been read by the plain reader as one: it gave None)
            return spec_from_dict(d, dialect, index)
    return spec if spec is not None else _read_spec(d, dialect, index)


def _read_spec(d: Any, dialect: str, index: int | None) -> ToolSpec:
    """:func:`spec_from_dict` for any tool of any dialect."""
    ctx = Ctx(dialect, index, None)
    if type(d) is not dict and not isinstance(d, Mapping):
        raise ctx.error("", f"a tool must be an object, got {type(d).__name__}")
    wrapper_extra: dict[str, Any] = {}
    fn = d.get("function")
    if fn is not None and (type(fn) is dict or isinstance(fn, Mapping)) and "name" not in d:
        if not d.keys() <= _WRAPPER_KEYS:
            wrapper_extra = {k: v for k, v in d.items() if k not in _WRAPPER_KEYS}
        d = fn
    name = _str_field(ctx, d, "api_name" if dialect == "nestools" else "name", required=True)
    if not name:
        raise ctx.error("name", "is empty")
    ctx.name = name
    description = _str_field(ctx, d, "api_description", "description") or ""
    implicit = dialect in _REQUIRED_UNLESS_OPTIONAL

    params: dict[str, Param] = {}
    required: tuple[str, ...] = ()
    blocks = _BLOCKS.get(dialect, ("parameters",))
    for key in blocks:
        if d.get(key) is None:
            continue
        ps, req = read_param_map(ctx, key, d[key], implicit)
        dup = set(ps) & set(params) if params else None
        if dup:
            raise ctx.error(key, f"parameters {sorted(dup)} are declared twice")
        params.update(ps)
        required += req
    top_req = d.get("required")
    if top_req is not None and not isinstance(top_req, bool):
        required = _names(ctx, "required", top_req) + tuple(r for r in required if r not in top_req)

    free_form = bool(ctx.free_form)
    outputs: dict[str, Param] = {}
    for key in ("responses", "output_parameters", "output_parameter", "outputSchema"):
        if d.get(key) is not None:
            outputs.update(read_param_map(ctx, key, d[key])[0])
    extra = {} if d.keys() <= _TOOL_KEYS else {k: v for k, v in d.items() if k not in _TOOL_KEYS}
    extra.update(wrapper_extra)
    for key in blocks:
        block = d.get(key)
        if block is False or (type(block) is dict or block is not None and isinstance(block, Mapping)) and block.get(
            "additionalProperties"
        ) is False:
            extra["additionalProperties"] = False  # a closed parameter list: tier-1 repair may trust it fully
            break
    return ToolSpec(name, description, params, tuple(dict.fromkeys(required)), outputs, dialect=dialect, extra=extra,
                    notes=tuple(ctx.notes), free_form=free_form)
