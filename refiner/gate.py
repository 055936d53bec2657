"""The schema gate: cheap, model-free checks of tool calls against the tool list.

It says what is wrong, as :class:`Finding` records, and never fixes anything (that is :mod:`refiner.repair`). Codes:
``format`` (the text is not strictly valid in its wire format), ``no_calls``, ``unknown_tool``, ``missing_required``,
``unknown_param``, ``lost_call`` (tier 1's calls leave out a call, or text in one, that could not be read);
``type``, ``enum``, ``range``, ``pattern`` and ``length`` of values against their JSON Schema,
through array items and object properties (a parameter's own declared default is always valid); between calls,
``undefined_reference``, ``forward_reference`` and ``duplicate_output``; ``truncated`` (the text stops inside a call,
mid-value); and the warnings ``unchecked`` (work bound reached), ``spec`` (the tool's schema was read otherwise than
written: :mod:`refiner.specs.schema`) and ``offered_names`` (calls found only by the offered names:
:mod:`refiner.formats.markup`).

Every function is total and bounded: values are inspected to a depth of :data:`MAX_DEPTH`, at most
:data:`MAX_CHECKED_VALUES` per call list; messages show values through :func:`refiner.calls.preview`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
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
from refiner.specs.model import Param
from refiner.specs.types import JSON_TYPES, MAX_DEPTH, json_type_of  # (values deeper than MAX_DEPTH: not inspected)

ERROR = "error"
WARNING = "warning"
REPAIR = "repair"  # the severity of a finding that is a repair tier 1 made (refiner.repair)

# How a caller's data writes argument values: "typed" (the JSON type the spec declares) or "text" (every value as a
# string, as API-Bank's gold does). A data set's convention, never a wire format's: the caller says which.
VALUE_STYLES = ("typed", "text")

_MAX_PATTERN_INPUT = 10_000  # strings longer than this are not matched against schema patterns
MAX_CHECKED_VALUES = 4096  # values (arguments, items, properties) checked per call list
_SEVERITY = attrgetter("severity")


@dataclass(frozen=True, init=False)
class Finding:
    """One finding about a call list: what the gate found (severity ``error`` or ``warning``) or a repair tier 1 made
    (severity ``repair``); ``call``: the call's index in the list (None for text-level findings)."""

    code: str
    message: str
    call: int | None = None
    tool: str | None = None
    param: str | None = None
    severity: str = ERROR

    def __init__(self, code: str, message: str, call: int | None = None, tool: str | None = None,
                 param: str | None = None, severity: str = ERROR) -> None:
        # (one dict update instead of the frozen dataclass's six object.__setattr__ calls)
        self.__dict__.update(code=code, message=message, call=call, tool=tool, param=param, severity=severity)

    def to_dict(self) -> dict[str, Any]:
        """``{"code", "message", "call", "tool", "param", "severity"}``."""
        return self.__dict__.copy()


@dataclass(init=False)
class GateReport:
    """What the gate found for one text: the text as read (:class:`refiner.formats.reading.Reading`), its calls and
    the findings."""

    reading: Reading | None
    diagnostics: list[Finding]
    calls: list[ToolCall]
    strict_ok: bool
    cut: formats.Cut | None  # where the calls stop inside a call
    salvaged: Salvage | None  # where the calls were found, when salvage read them
    loose: bool  # arguments were let pass unchecked: a free-form tool's undeclared ones, or all in a names-only format

    def __init__(self, reading: Reading | None = None) -> None:
        self.reading, self.diagnostics, self.loose = reading, [], False
        self.calls, self.strict_ok, self.cut, self.salvaged = ([], False, None, None) if reading is None else (
            reading.calls, reading.strict_ok, reading.cut, reading.salvaged)

    @property
    def passed(self) -> bool:
        return passes(self.diagnostics)

    @property
    def n_errors(self) -> int:
        return list(map(_SEVERITY, self.diagnostics)).count(ERROR)


def passes(diagnostics: Iterable[Finding]) -> bool:
    """True when no diagnostic is an error."""
    return ERROR not in map(_SEVERITY, diagnostics)


def _check_references(calls: Sequence[ToolCall]) -> list[Finding]:
    made_by = producers(calls)
    if not made_by:
        return []  # no call has an output label (a format without them cannot express references between calls)
    out: list[Finding] = []
    seen: set[str] = set()
    for i, c in enumerate(calls):
        for label in c.outputs:
            bare = output_label(label)
            if bare in seen:
                out.append(Finding("duplicate_output", f"output label {label!r} is produced twice", i, c.name))
            seen.add(bare)
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


_EXACT_TYPES = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
                dict: "object"}


def json_type(value: Any) -> str:
    """The JSON type name of a parsed value (lists are arrays, mappings objects); the Python type name otherwise."""
    return _EXACT_TYPES.get(type(value)) or json_type_of(value, arrays=(list,), objects=(Mapping,)) or type(
        value).__name__


def type_matches(type_name: str | None, value: Any) -> bool:
    """Whether ``value`` has the JSON Schema type ``type_name`` (an integer is a number; unknown or absent types
    accept anything)."""
    if type_name not in JSON_TYPES:
        return True
    got = json_type(value)
    return got == type_name or (type_name == "number" and got == "integer")


def in_enum(value: Any, members: Iterable[Any]) -> bool:
    """Whether ``value`` equals one of ``members`` with the same JSON type (``1`` is not ``true``); False when a
    comparison fails."""
    try:
        return any(value == m and (type(value) is type(m) or json_type(value) == json_type(m)) for m in members)
    except Exception:  # noqa: BLE001 - a value that cannot be compared is not a member
        return False


def _clip(text: Any, limit: int = 60) -> str:
    """A name for a message, as it is, cut to ``limit`` characters."""
    if type(text) is not str:
        text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_declared_default(param: Any, value: Any) -> bool:
    """Whether ``value`` is the parameter's own declared default, or ``null`` where the type is nullable: the spec's
    own default is valid whatever its type or enum say."""
    if value is None and getattr(param, "nullable", False):
        return True
    return bool(getattr(param, "has_default", False)) and in_enum(value, (getattr(param, "default", None),))


def excused(param: Any, value: Any) -> bool:
    """Whether ``value`` has no finding whatever it holds: a reference, or the parameter's own declared default."""
    return is_reference(value) or is_declared_default(param, value)


def check_value(
    param: Param | None, value: Any, where: str, depth: int = 0, *, count: Count, strings: bool = False
) -> list[tuple[str, str]]:
    """``(code, message)`` pairs for one value against one parameter schema, recursively (to :data:`MAX_DEPTH`,
    and as many values as ``count`` has left). ``strings``: value style "text" (:data:`VALUE_STYLES`): text of the
    declared type, its enum compared as text. A reference or the parameter's own declared default has none (asked
    when the value has a finding or items to walk)."""
    if depth > MAX_DEPTH or param is None or not count.take():
        return []
    ptype, enum = param.type, param.enum
    if strings and ptype is not None:
        if not isinstance(value, str):
            why = f"{where} should be written as a string ({ptype}), got {json_type(value)} {preview(value)}"
            return [] if excused(param, value) else [("type", why)]
        if enum and value not in {str(e) for e in enum}:
            return [] if excused(param, value) else [
                ("enum", f"{where} is {preview(value)}, not one of {preview(list(enum), 120)}")]
        return []
    got = _EXACT_TYPES.get(type(value))  # (the usual match told without type_matches)
    if ptype != got and ptype is not None and not (ptype == "number" and got == "integer") and not type_matches(
            ptype, value):
        why = f"{where} should be {ptype}, got {json_type(value)} {preview(value)}"
        return [] if excused(param, value) else [("type", why)]
    out: list[tuple[str, str]] = []
    if enum and not in_enum(value, enum):
        out.append(("enum", f"{where} is {preview(value)}, not one of {preview(list(enum), 120)}"))
    items = props = None  # (what is walked below: the items of a list, the properties of an object)
    if got == "string" or got == "array" or got is None and isinstance(value, (str, list)):
        lo, hi, pattern = param.min_length, param.max_length, param.pattern
        if isinstance(lo, int) and len(value) < lo:
            out.append(("length", f"{where} has length {len(value)}, below the minimum {lo}"))
        if isinstance(hi, int) and len(value) > hi:
            out.append(("length", f"{where} has length {len(value)}, above the maximum {hi}"))
        if isinstance(pattern, str) and isinstance(value, str) and len(value) <= _MAX_PATTERN_INPUT:
            try:
                if re.search(pattern, value) is None:
                    out.append(("pattern", f"{where} {preview(value)} does not match the pattern {pattern!r}"))
            except re.error:
                pass  # a pattern Python cannot compile is not the call's fault
        items = param.items if value and (got == "array" or got is None and isinstance(value, list)) else None
    elif got == "integer" or got == "number" or got is None and isinstance(value, (int, float)) and not isinstance(
            value, bool):
        lo, hi = param.minimum, param.maximum
        try:
            if lo is not None and value < lo:
                out.append(("range", f"{where} is {preview(value)}, below the minimum {preview(lo)}"))
            if hi is not None and value > hi:
                out.append(("range", f"{where} is {preview(value)}, above the maximum {preview(hi)}"))
        except TypeError:
            pass
    elif got == "object" or got is None and isinstance(value, Mapping):
        for req in param.required or ():
            if req not in value:
                out.append(("missing_required", f"{where} lacks the required field {req!r}"))
        props = param.properties if value else None
    if (out or items is not None or props) and excused(param, value):
        return []
    if items is not None:
        for k, item in enumerate(value):
            if count.left <= 0:
                break
            out.extend(check_value(items, item, f"{where}[{k}]", depth + 1, count=count))
    elif props:
        for k, v in value.items():
            if count.left <= 0:
                break
            if k in props:
                out.extend(check_value(props[k], v, f"{where}.{_clip(k)}", depth + 1, count=count))
    return out


def check_calls(
    calls: Sequence[ToolCall], tools: Iterable[Any] | Mapping[str, Any] | None, *, fmt: str | None = None,
    text_values: bool = False, report: GateReport | None = None,
) -> list[Finding]:
    """Findings for a call list against a tool list (``tools=None``: only reference checks). ``fmt``: the wire
    format, which says whether calls carry names only; ``text_values``: every value should be written as text;
    ``report``: the report they are added to (its ``diagnostics``, returned; its ``loose``)."""
    index = tool_index(tools)
    names_only = fmt is not None and formats.get(fmt).names_only
    out: list[Finding] = [] if report is None else report.diagnostics
    if report is not None:
        report.loose = names_only
    count = Count(MAX_CHECKED_VALUES)
    unchecked = 0
    unknown: dict[str, str] = {}  # (the message for each name no tool has, written once)
    labelled = index is None  # (whether some call has an output label, which a reference may name)
    for i, call in enumerate(calls if index is not None else ()):
        if count.left <= 0:
            unchecked = len(calls) - i
            break
        count.left -= 1
        labelled = labelled or call.outputs
        spec = index.get(call.name)
        if spec is None:
            message = unknown.get(call.name)
            if message is None:
                message = unknown[call.name] = f"no tool named {preview(call.name)}"
            out.append(Finding("unknown_tool", message, i, call.name))
        elif not names_only:  # (the call against its tool's spec)
            name, arguments, params = call.name, call.arguments, spec.params
            if spec.notes:
                more = f" (+{len(spec.notes) - 1} more)" if len(spec.notes) > 1 else ""
                out.append(Finding("spec", f"the schema of {_clip(name)} was read otherwise than written: "
                                   f"{spec.notes[0]}{more}", i, name, severity=WARNING))
            for req in spec.required:
                if req not in arguments:
                    out.append(Finding("missing_required", f"required parameter {req!r} is missing", i, name, req))
            for key, value in arguments.items():
                if count.left <= 0:
                    break
                if key in params:
                    for code, msg in check_value(params[key], value, _clip(key), strings=text_values, count=count):
                        out.append(Finding(code, msg, i, name, key))
                else:
                    count.left -= 1
                    if spec.free_form is not True:  # (a free-form tool takes any argument)
                        out.append(Finding("unknown_param", f"{_clip(name)} has no parameter {preview(key)}", i,
                                           name, key))
            if spec.free_form and report is not None:
                report.loose = True
    if count.left < 0 or unchecked:
        what = f"the last {unchecked} call(s) and " if unchecked else ""
        out.append(Finding("unchecked", f"{what}values beyond the first {MAX_CHECKED_VALUES} were not checked",
                           severity=WARNING))
    if not names_only and (labelled or unchecked):
        out.extend(_check_references(calls))
    return out


def check_text(
    text: str, fmt: str, tools: Iterable[Any] | Mapping[str, Any] | None, *, text_values: bool = False,
    offered: Mapping[str, Any] | None = None,
) -> GateReport:
    """The gate on ``text`` in ``fmt`` as :func:`refiner.formats.reading.read_text` reads it (``offered``: the tools'
    parameters by name, when the caller has them); ``text_values``: value style "text"."""
    return check_reading(read_text(text, fmt, tools, offered=offered), tools, text_values=text_values)


# Lenient-reading problems that leave a call, or text inside one, out of the calls read.
LOST_CALL_CODES = frozenset({"not_a_call", "no_name", "markup_name", "unreadable"})


def lost_call(reading: Reading | None) -> Finding | None:
    """A ``lost_call`` error when the calls read from ``reading`` leave out a call, or text in one, that could not be
    read (its format's lenient reading, not salvage's, gave them), else None."""
    lenient = reading.lenient if reading is not None and reading.salvaged is None else None
    lost = [p for p in lenient.problems if p.code in LOST_CALL_CODES] if lenient is not None else ()
    return Finding("lost_call", f"{len(lost)} piece(s) of the upstream's calls could not be read and are left out: "
                   f"{lost[0]}") if lost else None


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
    if report.calls:
        check_calls(report.calls, tools, fmt=reading.fmt, text_values=text_values, report=report)
    else:
        report.diagnostics.append(Finding("no_calls", "no tool call could be read", severity=WARNING))
    return report
