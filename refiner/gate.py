"""The schema gate: cheap, model-free checks of tool calls against the tool list.

It says *what* is wrong, as structured :class:`Finding` records, never how to fix it (that is
:mod:`refiner.repair`). Checks (after RETO's Schema Gate and Gecko's syntactic validation rules):

- the text is strictly valid in its wire format (``format``), and holds at least one call (``no_calls``);
- the tool exists (``unknown_tool``);
- every required parameter is present (``missing_required``) and no unknown one is (``unknown_param``);
- values match the declared JSON Schema type (``type``), enum (``enum``), numeric range (``range``), string pattern
  (``pattern``) and string/array length (``length``), recursively through array items and object properties; the
  parameter's own declared default is always valid (:func:`is_declared_default`);
- in nested call lists, every reference (NesTools ``API_call_N``, NESTFUL ``$var$`` / ``$var.field$``) names the
  output of an *earlier* call (``undefined_reference``, ``forward_reference``), and output labels are unique
  (``duplicate_output``);
- a text that stops inside a call, mid-value, was cut short (``truncated``; :attr:`GateReport.cut` says where);
- the called tool's schema was read otherwise than as written (``spec``, a warning: a top-level ``anyOf`` merged, a
  reference that points nowhere, free-form parameters, whose arguments are not checked by name: see
  :mod:`refiner.specs.schema`);
- calls were found only by the offered tool and parameter names, in markup no format knows (``offered_names``, a
  warning: :mod:`refiner.formats.markup`).

Every function here is total: any input yields diagnostics, never an exception. Work is bounded by counts: values
are inspected to a depth of :data:`_MAX_DEPTH` and at most :data:`MAX_CHECKED_VALUES` values (arguments, items,
properties) and :data:`refiner.calls.MAX_REFERENCE_VALUES` values searched for references per call list; what lies beyond is not
inspected and one ``unchecked`` warning says so. Messages show values through :func:`refiner.calls.preview`, whose
cost does not grow with the value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from refiner import formats
from refiner.calls import (
    MAX_REFERENCE_VALUES,
    Count,
    ToolCall,
    is_reference,
    output_label,
    preview,
    producers,
    references_in,
)
from refiner.formats.reading import Reading, read_text, tool_index
from refiner.formats.salvage import Salvage
from refiner.specs.types import json_type_of

ERROR = "error"
WARNING = "warning"
REPAIR = "repair"  # the severity of a finding that is a repair tier 1 made (refiner.repair)

# Codes, in the order a reader meets them; documented in the module docstring.
CODES = (
    "format",
    "no_calls",
    "unknown_tool",
    "missing_required",
    "unknown_param",
    "type",
    "enum",
    "range",
    "pattern",
    "length",
    "undefined_reference",
    "forward_reference",
    "duplicate_output",
    "truncated",
    "unchecked",
    "spec",
    "offered_names",
)

# Value styles: how a caller's data set writes argument values. "typed" (the default): as the JSON type the spec
# declares. "text": every value as a string whatever the declared type (API-Bank's gold writes integers, numbers,
# booleans and lists as strings: 1,276 of 1,276 gold values in its three levels). A data set's convention, never a
# wire format's: whoever knows it says so (the request's ``value_style``, a benchmark, a data source).
VALUE_STYLES = ("typed", "text")

_MAX_DEPTH = 32  # nesting depth beyond which values are not inspected further
_MAX_PATTERN_INPUT = 10_000  # strings longer than this are not matched against schema patterns
# Values (arguments and the items and properties inside them) checked against their schemas per call list: real
# call lists hold tens; a 200 KB text can hold 100,000 (references: refiner.calls.MAX_REFERENCE_VALUES).
MAX_CHECKED_VALUES = 4096


@dataclass(frozen=True, init=False)
class Finding:
    """One finding about a call list: what the gate found (severity ``error`` or ``warning``) or a repair tier 1 made
    (severity ``repair``). ``code`` says which (the gate's :data:`CODES`, tier 1's kinds in :mod:`refiner.repair`);
    ``call`` is the call's index in the list (None for text-level findings)."""

    code: str
    message: str
    call: int | None = None
    tool: str | None = None
    param: str | None = None
    severity: str = ERROR

    def __init__(self, code: str, message: str, call: int | None = None, tool: str | None = None,
                 param: str | None = None, severity: str = ERROR) -> None:
        # (the generated constructor of a frozen dataclass sets each field through object.__setattr__: twice this
        # cost, paid per finding of a long call list)
        self.__dict__.update(code=code, message=message, call=call, tool=tool, param=param, severity=severity)

    def to_dict(self) -> dict[str, Any]:
        """``{"code", "message", "call", "tool", "param", "severity"}``."""
        return self.__dict__.copy()  # (its fields, in order: the constructor sets them all)


@dataclass
class GateReport:
    """What the gate found for one text: the text as read (:class:`refiner.formats.reading.Reading`: its calls,
    strictness, cut, salvage) and the findings."""

    reading: Reading | None = None
    diagnostics: list[Finding] = field(default_factory=list)

    @property
    def calls(self) -> list[ToolCall]:
        return self.reading.calls if self.reading is not None else []

    @property
    def strict_ok(self) -> bool:
        return self.reading is not None and self.reading.strict_ok

    @property
    def cut(self) -> formats.Cut | None:
        """Where the calls stop inside a call (:class:`refiner.formats.Cut`), or None."""
        return self.reading.cut if self.reading is not None else None

    @property
    def salvaged(self) -> Salvage | None:
        """Where the calls were found, when salvage read them."""
        return self.reading.salvaged if self.reading is not None else None

    @property
    def passed(self) -> bool:
        return passes(self.diagnostics)

    @property
    def n_errors(self) -> int:
        return count_errors(self.diagnostics)


def passes(diagnostics: Iterable[Finding]) -> bool:
    """True when no diagnostic is an error."""
    return not any(d.severity == ERROR for d in diagnostics)


def count_errors(diagnostics: Iterable[Finding]) -> int:
    return sum(1 for d in diagnostics if d.severity == ERROR)


# ----------------------------------------------------------------------------------------------------------------
# References between calls


def _check_references(calls: Sequence[ToolCall]) -> list[Finding]:
    out: list[Finding] = []
    made_by = producers(calls)
    seen: set[str] = set()
    for i, c in enumerate(calls):
        for label in c.outputs:
            bare = output_label(label)
            if bare in seen:
                out.append(Finding("duplicate_output", f"output label {label!r} is produced twice", i, c.name))
            seen.add(bare)
    if not made_by:
        return out  # a format without output labels cannot express references between calls
    count = Count(MAX_REFERENCE_VALUES)
    for i, c in enumerate(calls):
        for key, value in c.arguments.items():
            for ref in references_in(value, count=count):
                j = made_by.get(ref)
                if j is None:
                    out.append(Finding("undefined_reference", f"{ref!r} is not the output of any call", i, c.name, key))
                elif j >= i:
                    out.append(Finding("forward_reference", f"{ref!r} is produced by call {j}, which does not come "
                                       f"before call {i}", i, c.name, key))
    return out


# ----------------------------------------------------------------------------------------------------------------
# Values against parameter schemas

_PY_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, Mapping),
    "null": lambda v: v is None,
}


def type_matches(type_name: str | None, value: Any) -> bool:
    """Whether ``value`` has the JSON Schema type ``type_name`` (unknown or absent types accept anything)."""
    if type_name is None:
        return True
    check = _PY_TYPES.get(type_name)
    return True if check is None else bool(check(value))


def json_type(value: Any) -> str:
    """The JSON type name of a parsed value (lists are arrays, mappings objects); the Python type name otherwise."""
    return json_type_of(value, arrays=(list,), objects=(Mapping,)) or type(value).__name__


def _clip(text: Any, limit: int = 60) -> str:
    """A name for a message, as it is, cut to ``limit`` characters."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_declared_default(param: Any, value: Any) -> bool:
    """Whether ``value`` is the parameter's own declared default (same JSON type), or ``null`` where the type is
    nullable. The spec's own default is never wrong, whatever its type or enum say: BFCL declares
    ``"county": {"type": "string", "default": null}`` and ``"genre": {"enum": ["World", ...], "default": "dontcare"}``,
    and its gold passes exactly those values."""
    if value is None and getattr(param, "nullable", False):
        return True
    if not getattr(param, "has_default", False):
        return False
    default = getattr(param, "default", None)
    try:
        return bool(value == default) and json_type(value) == json_type(default)
    except Exception:  # noqa: BLE001 - a value that cannot be compared is not the default
        return False


def check_value(
    param: Any, value: Any, where: str, depth: int = 0, *, strings: bool = False, count: Count | None = None
) -> list[tuple[str, str]]:
    """``(code, message)`` pairs for one value against one parameter schema (recursively, to a depth of
    ``_MAX_DEPTH`` and as many values as ``count`` has left: :data:`MAX_CHECKED_VALUES` by default). ``strings``: the
    format writes every value as text (value style "text", see :data:`VALUE_STYLES`)."""
    if count is None:
        count = Count(MAX_CHECKED_VALUES)
    if depth > _MAX_DEPTH or param is None or not count.take():
        return []
    if is_reference(value):
        return []
    if is_declared_default(param, value):
        return []
    ptype = getattr(param, "type", None)
    if strings and ptype is not None:
        return _check_text_value(param, value, where)
    if not type_matches(ptype, value):
        return [("type", f"{where} should be {ptype}, got {json_type(value)} {preview(value)}")]
    out: list[tuple[str, str]] = []
    enum = getattr(param, "enum", None)
    if enum:
        try:
            ok = value in enum and any(json_type(value) == json_type(e) for e in enum if e == value)
        except Exception:
            ok = False
        if not ok:
            out.append(("enum", f"{where} is {preview(value)}, not one of {preview(list(enum), 120)}"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = getattr(param, "minimum", None), getattr(param, "maximum", None)
        try:
            if lo is not None and value < lo:
                out.append(("range", f"{where} is {preview(value)}, below the minimum {preview(lo)}"))
            if hi is not None and value > hi:
                out.append(("range", f"{where} is {preview(value)}, above the maximum {preview(hi)}"))
        except TypeError:
            pass
    if isinstance(value, (str, list)):
        lo, hi = getattr(param, "min_length", None), getattr(param, "max_length", None)
        n = len(value)
        if isinstance(lo, int) and n < lo:
            out.append(("length", f"{where} has length {n}, below the minimum {lo}"))
        if isinstance(hi, int) and n > hi:
            out.append(("length", f"{where} has length {n}, above the maximum {hi}"))
    pattern = getattr(param, "pattern", None)
    if isinstance(value, str) and isinstance(pattern, str) and len(value) <= _MAX_PATTERN_INPUT:
        try:
            if re.search(pattern, value) is None:
                out.append(("pattern", f"{where} {preview(value)} does not match the pattern {pattern!r}"))
        except re.error:
            pass  # a pattern Python cannot compile is not the call's fault
    if isinstance(value, list):
        items = getattr(param, "items", None)
        if items is not None:
            for k, item in enumerate(value):
                if count.left <= 0:
                    break
                out.extend(check_value(items, item, f"{where}[{k}]", depth + 1, count=count))
    elif isinstance(value, Mapping):
        props = getattr(param, "properties", None) or {}
        for req in getattr(param, "required", None) or ():
            if req not in value:
                out.append(("missing_required", f"{where} lacks the required field {req!r}"))
        for k, v in value.items():
            if count.left <= 0:
                break
            if k in props:
                out.extend(check_value(props[k], v, f"{where}.{_clip(k)}", depth + 1, count=count))
    return out


def _check_text_value(param: Any, value: Any, where: str) -> list[tuple[str, str]]:
    """A value under value style "text": text of the declared type, compared with the enum as text."""
    if not isinstance(value, str):
        return [("type", f"{where} should be written as a string ({param.type}), got {json_type(value)} {preview(value)}")]
    enum = getattr(param, "enum", None)
    if enum and value not in {e if isinstance(e, str) else json_text(e) for e in enum}:
        return [("enum", f"{where} is {preview(value)}, not one of {preview(list(enum), 120)}")]
    return []


def json_text(value: Any) -> str:
    """A scalar as API-Bank-style text: ``12``, ``1.5``, ``True``."""
    return str(value)


def check_call(
    call: ToolCall,
    spec: Any,
    index: int | None = None,
    *,
    names_only: bool = False,
    strings: bool = False,
    count: Count | None = None,
) -> list[Finding]:
    """Findings for one call against its tool's spec (at most as many values as ``count`` has left:
    :data:`MAX_CHECKED_VALUES` by default)."""
    if names_only:
        return []
    if count is None:
        count = Count(MAX_CHECKED_VALUES)
    out: list[Finding] = []
    params: Mapping[str, Any] = getattr(spec, "params", None) or {}
    args = call.arguments
    name = _clip(call.name)
    free_form = getattr(spec, "free_form", False) is True
    notes = getattr(spec, "notes", None) or ()
    if notes:
        more = f" (+{len(notes) - 1} more)" if len(notes) > 1 else ""
        out.append(Finding("spec", f"the schema of {name} was read otherwise than written: {notes[0]}{more}",
                              index, call.name, severity=WARNING))
    for req in getattr(spec, "required", None) or ():
        if req not in args:
            out.append(Finding("missing_required", f"required parameter {req!r} is missing", index, call.name, req))
    for key, value in args.items():
        if count.left <= 0:
            break
        if key not in params:
            count.take()
            if free_form:  # the tool takes any argument
                continue
            out.append(
                Finding("unknown_param", f"{name} has no parameter {preview(key)}", index, call.name, key)
            )
            continue
        for code, msg in check_value(params[key], value, _clip(key), strings=strings, count=count):
            out.append(Finding(code, msg, index, call.name, key))
    return out


def check_calls(
    calls: Sequence[ToolCall],
    tools: Iterable[Any] | Mapping[str, Any] | None,
    *,
    fmt: str | None = None,
    text_values: bool = False,
) -> list[Finding]:
    """Findings for a call list against a tool list (``tools=None``: only reference checks). ``fmt``: the wire
    format, which says whether calls carry names only; ``text_values``: every value should be written as text."""
    index = tool_index(tools)
    names_only = fmt is not None and formats.get(fmt).names_only
    out: list[Finding] = []
    count = Count(MAX_CHECKED_VALUES)
    unchecked = 0
    for i, call in enumerate(calls):
        if index is None:
            continue
        if count.left <= 0:
            unchecked = len(calls) - i
            break
        count.take()
        spec = index.get(call.name)
        if spec is None:
            out.append(Finding("unknown_tool", f"no tool named {preview(call.name)}", i, call.name))
            continue
        out.extend(check_call(call, spec, i, names_only=names_only, strings=text_values, count=count))
    if count.left < 0 or unchecked:
        what = f"the last {unchecked} call(s) and " if unchecked else ""
        out.append(Finding("unchecked", f"{what}values beyond the first {MAX_CHECKED_VALUES} were not checked",
                           severity=WARNING))
    if not names_only:
        out.extend(_check_references(calls))
    return out


def check_text(
    text: str,
    fmt: str,
    tools: Iterable[Any] | Mapping[str, Any] | None,
    *,
    text_values: bool = False,
    offered: Mapping[str, Any] | None = None,
) -> GateReport:
    """Gates the calls ``text`` holds in ``fmt``, read by :func:`refiner.formats.reading.read_text` (strictly, then
    leniently, values typed by the specs; ``offered``: :func:`refiner.formats.reading.params_by_tool` of ``tools``
    when the caller has it). ``text_values``: value style "text", see :data:`VALUE_STYLES`."""
    return check_reading(read_text(text, fmt, tools, offered=offered), tools, text_values=text_values)


def check_reading(
    reading: Reading, tools: Iterable[Any] | Mapping[str, Any] | None, *, text_values: bool = False
) -> GateReport:
    """The gate's findings on a text as read (:class:`refiner.formats.reading.Reading`)."""
    report = GateReport(reading)
    if not reading.strict_ok:
        report.diagnostics.append(Finding("format", f"not valid {reading.fmt}: {reading.strict_reason}"))
    cut = reading.text_cut
    if cut is not None and not cut.clean:
        report.diagnostics.append(Finding("truncated", cut.describe(), cut.index, cut.name))
    found = reading.salvaged
    by_names = [c for site in found.sites if site.by_names for c in site.calls] if found is not None else ()
    if by_names:
        report.diagnostics.append(Finding(
            "offered_names", f"{len(by_names)} call(s) found only by the offered tool and parameter names, in markup "
            f"no format knows: {found.describe()}", severity=WARNING))
    if not report.calls:
        report.diagnostics.append(Finding("no_calls", "no tool call could be read", severity=WARNING))
    report.diagnostics.extend(check_calls(report.calls, tool_index(tools), fmt=reading.fmt, text_values=text_values))
    return report
