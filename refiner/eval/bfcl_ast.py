"""BFCL's AST checker for the Python categories, written from its rules: accepted values per parameter (``""``:
may be left out), schema types, strings compared without spaces, ``,./-_*^`` and case; parallel calls in any order."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from refiner.calls import ToolCall

PY_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list,
                             "tuple": list, "dict": dict, "object": dict, "any": str, "number": float}

_STRIP = re.compile(r"[ ,./\-_*^]")


@dataclass
class Check:
    valid: bool
    error: str = ""

    def __bool__(self) -> bool:
        return self.valid


OK = Check(True)


def standardize(s: str) -> str:
    return _STRIP.sub("", s).lower().replace("'", '"')


def _std(v: Any) -> Any:
    return standardize(v) if isinstance(v, str) else v


def _type_ok(value: Any, expected: type, item_type: type | None, options: Sequence[Any]) -> tuple[bool, bool]:
    """``(valid, is_variable)``, as BFCL's ``type_checker``: a value of the schema's type is valid (for an array, when
    its items pass this same check against the items of one list option, or an option is not a list); a value of
    another type is valid when it has the possible answer's type, and is then a variable reference (compared as is).
    A failed item check is final."""
    ans_type = next((type(o) for o in options if o != ""), None)  # the possible answer's type
    is_var = ans_type is not None and ans_type is not expected
    if type(value) is expected:
        if item_type is None:
            return True, is_var
        for opt in options:
            if not isinstance(opt, list) or all(_type_ok(v, item_type, None, opt)[0] for v in value):
                return True, is_var
        return False, False
    ok = ans_type is not None and type(value) is ans_type
    return ok, ok


def _dict_ok(value: Mapping, options: Sequence[Any]) -> bool:
    for opt in options:
        if opt == "" or not isinstance(opt, Mapping):
            continue
        if any(k not in opt or _std(v) not in [_std(o) for o in opt[k]] for k, v in value.items()):
            continue
        if any(k not in value and "" not in opts for k, opts in opt.items()):
            continue
        return True
    return False


def _list_ok(value: list, options: Sequence[Any], of_dicts: bool) -> bool:
    """Whether ``value`` matches one list option (``""``: no items, so it accepts the empty list): item by item as
    dict options when ``of_dicts``, else the standardized items equal."""
    lists = [opt if isinstance(opt, list) else [] for opt in options if isinstance(opt, list) or opt == ""]
    if of_dicts:
        return any(len(opt) == len(value) and all(isinstance(v, Mapping) and _dict_ok(v, [o]) for v, o in zip(value, opt))
                   for opt in lists)
    return [_std(x) for x in value] in [[_std(x) for x in opt] for opt in lists]


def check_call(spec: Mapping[str, Any], call: ToolCall, answer: Mapping[str, Sequence[Any]]) -> Check:
    """One call against one function's possible answer (``{param: [accepted values]}``)."""
    if call.name != spec["name"]:
        return Check(False, f"wrong function name {call.name!r}, expected {spec['name']!r}")
    params = spec.get("parameters") or {}
    props: Mapping[str, Any] = params.get("properties") or {}
    args = dict(call.arguments)
    for req in params.get("required") or ():
        if req not in args:
            return Check(False, f"missing required parameter {req!r}")
    for p, value in args.items():
        if p not in props or p not in answer:
            return Check(False, f"unexpected parameter {p!r}")
        options = list(answer[p])
        tname = props[p].get("type", "any")
        expected = PY_TYPES.get(tname, str)
        item_type = None
        if tname in ("array", "tuple"):
            item_type = PY_TYPES.get((props[p].get("items") or {}).get("type", ""), None)
        if tname == "float" and type(value) is int:
            value = float(value)
        ok, is_var = _type_ok(value, expected, item_type, options)
        if not ok:
            return Check(False, f"parameter {p!r}: wrong type {type(value).__name__}, expected {tname}")
        if is_var or expected not in (dict, list, str):
            ok = value in options
        elif expected is dict:
            ok = _dict_ok(value, options)
        elif expected is str:
            ok = standardize(value) in [standardize(o) for o in options if isinstance(o, str)]
        else:
            ok = _list_ok(value, options, item_type is dict)
        if not ok:
            return Check(False, f"parameter {p!r}: {value!r} matches none of {options!r}")
    for p, options in answer.items():
        if p not in args and "" not in options:
            return Check(False, f"parameter {p!r} left out but not optional")
    return OK


def _find_spec(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for f in functions:
        if f.get("name") == name:
            return f
    raise KeyError(f"possible answer names {name!r}, which is not among the offered functions")


def check(functions: Sequence[Mapping[str, Any]], calls: Sequence[ToolCall],
          possible: Sequence[Mapping[str, Mapping[str, Sequence[Any]]]]) -> Check:
    """A whole answer of any BFCL category: one call for each expected one, parallel calls in any order."""
    if len(calls) != len(possible):
        return Check(False, f"wrong number of calls: {len(calls)}, expected {len(possible)}")
    used: set[int] = set()
    for expected in possible:
        (name, answer), = expected.items()
        spec = _find_spec(functions, name)
        last = Check(False, f"no call matches {name!r}")
        for i, call in enumerate(calls):
            if i in used:
                continue
            last = check_call(spec, call, answer)
            if last:
                used.add(i)
                break
        if not last:
            return Check(False, f"no call matches the expected {name!r}: {last.error}")
    return OK


def first_answer(possible: Sequence[Mapping[str, Mapping[str, Sequence[Any]]]],
                 functions: Sequence[Mapping[str, Any]] | None = None) -> list[ToolCall]:
    """One correct call list: each parameter's first accepted value (inside dict values too). Optional parameters
    are left out when the function's schema does not declare them (a quirk of some BFCL answers); a required
    parameter whose only accepted value is ``""`` gets ``""`` (the one value BFCL's checker accepts there)."""
    calls = []
    for expected in possible:
        (name, answer), = expected.items()
        props, required = None, ()
        if functions is not None:
            params = _find_spec(functions, name).get("parameters") or {}
            props, required = params.get("properties") or {}, tuple(params.get("required") or ())
        args = {}
        for p, options in answer.items():
            vals = [o for o in options if o != ""]
            if not vals:
                if "" in options and p in required:
                    args[p] = ""
                continue
            if "" in options and props is not None and p not in props:
                continue
            args[p] = _first(vals[0])
        calls.append(ToolCall(name, args))
    return calls


def _first(value: Any) -> Any:
    if isinstance(value, Mapping):  # a dict option maps each key to its own list of accepted values
        out = {}
        for k, opts in value.items():
            vals = [o for o in opts if o != ""] if isinstance(opts, list) else [opts]
            if vals:
                out[k] = _first(vals[0])
        return out
    if isinstance(value, list):
        return [_first(v) if isinstance(v, Mapping) else v for v in value]
    return value
