"""The normalised tool description (:class:`ToolSpec`, :class:`Param`) and its JSON Schema / OpenAI renderings.

Every dialect loads into these two dataclasses; types use the JSON Schema vocabulary (``string``, ``integer``,
``number``, ``boolean``, ``array``, ``object``, ``null``) or ``None`` when the source does not say (or says "any").
They are frozen; their dict fields should be treated as read-only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from refiner.specs.types import JSON_TYPES


class SpecError(ValueError):
    """A tool spec that cannot be normalised. Names the dialect, the tool (index and name) and the field."""

    def __init__(self, dialect: str | None, message: str, *, tool: int | None = None, name: str | None = None,
                 field: str | None = None) -> None:
        self.dialect, self.tool, self.name, self.field, self.message = dialect, tool, name, field, message
        where = []
        if tool is not None:
            where.append(f"tool {tool}")
        if name:
            where.append(repr(name))
        loc = " ".join(where)
        if field:
            loc = f"{loc}, field {field!r}" if loc else f"field {field!r}"
        super().__init__(f"[{dialect or 'unknown dialect'}] {loc + ': ' if loc else ''}{message}")


@dataclass(frozen=True)
class Param:
    """One parameter (or output field, or nested property / array item) in JSON Schema terms."""

    type: str | None = None
    enum: tuple[Any, ...] | None = None
    default: Any = None
    has_default: bool = False
    description: str | None = None
    items: Param | None = None
    properties: dict[str, Param] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    pattern: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    nullable: bool = False
    format: str | None = None
    # JSON Schema keywords with no field of their own (e.g. additionalProperties, minItems, example), kept verbatim.
    extra: dict[str, Any] = field(default_factory=dict)
    # The type text as the source wrote it ("str, optional", "List[str]", "HashMap"); informational only.
    raw_type: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.type is not None and self.type not in JSON_TYPES:
            raise ValueError(f"Param.type must be one of {JSON_TYPES} or None, got {self.type!r}")
        if self.enum is not None and not isinstance(self.enum, tuple):
            object.__setattr__(self, "enum", tuple(self.enum))
        if not isinstance(self.required, tuple):
            object.__setattr__(self, "required", tuple(self.required))
        if self.default is not None and not self.has_default:
            object.__setattr__(self, "has_default", True)
        if self.type == "null" and not self.nullable:
            object.__setattr__(self, "nullable", True)

    @classmethod
    def of(cls, **fields: Any) -> Param:
        """``Param(**fields)``, checked as the constructor checks them; the fields not given keep the class's
        defaults."""
        p = object.__new__(cls)
        d = p.__dict__
        d["properties"], d["extra"] = {}, {}
        d.update(fields)
        p.__post_init__()
        return p

    @classmethod
    def plain(cls, type: str, description: str | None, enum: tuple[Any, ...] | None, items: Param | None,
              properties: dict[str, Param] | None, required: tuple[str, ...] | None, nullable: bool | None,
              default: Any = None, has_default: bool = False) -> Param:
        """``Param(type=type, ...)`` (``None``: the field's default) for a ``type`` of :data:`JSON_TYPES` other than
        ``null`` and a ``has_default`` true when ``default`` is not None, built with nothing left to check."""
        p = object.__new__(cls)
        d = p.__dict__
        d["type"], d["description"], d["enum"], d["items"] = type, description, enum, items
        d["properties"], d["extra"] = {} if properties is None else properties, {}
        d["required"], d["nullable"] = required or (), bool(nullable)
        if has_default:
            d["default"], d["has_default"] = default, True
        return p

    def to_json_schema(self) -> dict[str, Any]:
        """This parameter as a JSON Schema object (nullable types as ``["t", "null"]``)."""
        out: dict[str, Any] = {}
        if self.type is not None:
            out["type"] = [self.type, "null"] if self.nullable and self.type != "null" else self.type
        elif self.nullable:
            out["nullable"] = True
        if self.description is not None:
            out["description"] = self.description
        if self.enum is not None:
            out["enum"] = list(self.enum)
        if self.has_default:
            out["default"] = self.default
        if self.format is not None:
            out["format"] = self.format
        if self.items is not None:
            out["items"] = self.items.to_json_schema()
        if self.properties:
            out["properties"] = {k: p.to_json_schema() for k, p in self.properties.items()}
        if self.required:
            out["required"] = list(self.required)
        for key, value in (("minimum", self.minimum), ("maximum", self.maximum), ("pattern", self.pattern),
                           ("minLength", self.min_length), ("maxLength", self.max_length)):
            if value is not None:
                out[key] = value
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, description, parameters (with the required ones) and declared outputs."""

    name: str
    description: str = ""
    params: dict[str, Param] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    outputs: dict[str, Param] = field(default_factory=dict)
    # The dialect it was read from, and top-level keys that carry no schema (NESTFUL host/endpoint, OpenAI strict...).
    dialect: str | None = field(default=None, compare=False)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    # What the schema reader read otherwise than as written (refiner.specs.schema), and whether the tool takes any
    # arguments, which are then not checked by name.
    notes: tuple[str, ...] = field(default=(), compare=False)
    free_form: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"ToolSpec.name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.required, tuple):
            object.__setattr__(self, "required", tuple(self.required))

    @classmethod
    def plain(cls, name: str, description: str, params: dict[str, Param], required: tuple[str, ...], dialect: str,
              extra: dict[str, Any]) -> ToolSpec:
        """``ToolSpec(name, description, params, required, dialect=dialect, extra=extra)`` for a non-empty ``name``
        and a tuple ``required``, built with nothing left for the constructor to check (the fields not given keep the
        class's defaults)."""
        spec = object.__new__(cls)
        d = spec.__dict__
        d["name"], d["description"], d["params"], d["required"] = name, description, params, required
        d["outputs"], d["dialect"], d["extra"] = {}, dialect, extra
        return spec

    def param_schema(self) -> dict[str, Any]:
        """The parameters as one JSON Schema ``object``."""
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {k: p.to_json_schema() for k, p in self.params.items()},
            "required": list(self.required),
        }
        if self.extra.get("additionalProperties") is False:
            schema["additionalProperties"] = False
        elif self.free_form:
            schema["additionalProperties"] = True
        return schema

    def to_json_schema(self, *, include_outputs: bool = True) -> dict[str, Any]:
        """OpenAI-function shape ``{"name", "description", "parameters"}``; declared outputs (when any and asked
        for) go under ``"output_parameters"`` as a JSON Schema object, which :func:`load_tools` reads back."""
        out: dict[str, Any] = {"name": self.name, "description": self.description, "parameters": self.param_schema()}
        if include_outputs and self.outputs:
            out["output_parameters"] = {
                "type": "object",
                "properties": {k: p.to_json_schema() for k, p in self.outputs.items()},
            }
        return out


def to_openai_tools(specs: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """An OpenAI ``tools`` list: ``[{"type": "function", "function": {...}}]`` (outputs left out)."""
    return [{"type": "function", "function": s.to_json_schema(include_outputs=False)} for s in specs]


def render_tool_list(specs: Iterable[ToolSpec], *, include_outputs: bool = True) -> str:
    """A compact one-line JSON text of the tools, for prompts."""
    return json.dumps([s.to_json_schema(include_outputs=include_outputs) for s in specs], ensure_ascii=False)


def by_name(specs: Iterable[ToolSpec]) -> dict[str, ToolSpec]:
    """Specs keyed by tool name (a later duplicate name replaces an earlier one)."""
    return {s.name: s for s in specs}
