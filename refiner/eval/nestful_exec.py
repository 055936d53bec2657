"""Executing NESTFUL call sequences, ``$varN.field$`` resolved against earlier results: v2's math functions for
real (:class:`MathLibrary`), any other sequence symbolically (:func:`symbolic_result`: a call's result is the term
``name(arguments)``, so two sequences agree when they compute the same data flow)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from refiner.calls import ToolCall, canonical_json

REF = re.compile(r"\$(var\w*)(?:\.([^$]*))?\$")
RESULT_CALL = "var_result"


class ExecutionError(ValueError):
    """A sequence that cannot be executed (unknown label, unknown function, bad arguments)."""


def label_key(label: str) -> str:
    """``"$var_1"`` and ``"var_1"`` name the same variable."""
    return label.strip().strip("$")


def resolve(value: Any, env: Mapping[str, Any], field_of: Callable[[Any, str], Any]) -> Any:
    """``value`` with every reference replaced: a string that is one whole reference becomes the referenced value;
    references inside a longer string are substituted as text; lists and objects are resolved recursively."""
    if isinstance(value, str):
        whole = REF.fullmatch(value.strip())
        if whole:
            return _lookup(whole, env, field_of)
        if "$" in value and REF.search(value):
            return REF.sub(lambda m: str(_lookup(m, env, field_of)), value)
        return value
    if isinstance(value, list):
        return [resolve(v, env, field_of) for v in value]
    if isinstance(value, Mapping):
        return {k: resolve(v, env, field_of) for k, v in value.items()}
    return value


def _lookup(m: re.Match, env: Mapping[str, Any], field_of: Callable[[Any, str], Any]) -> Any:
    key, fld = m.group(1), m.group(2)
    if key not in env:
        raise ExecutionError(f"reference to ${key} before it is defined")
    return env[key] if not fld else field_of(env[key], fld)


def _run(calls: Sequence[ToolCall], call_fn: Callable[[str, dict], Any], field_of: Callable[[Any, str], Any]) -> Any:
    env: dict[str, Any] = {}
    last: Any = None
    for c in calls:
        args = resolve(dict(c.arguments), env, field_of)
        if c.name == RESULT_CALL:
            return args
        last = call_fn(c.name, args)
        for label in c.outputs:
            env[label_key(label)] = last
    return last


def _freeze(v: Any) -> Any:
    if isinstance(v, tuple):
        return {"__term__": [_freeze(x) for x in v]}
    if isinstance(v, list):
        return [_freeze(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _freeze(x) for k, x in v.items()}
    return v


def symbolic_result(calls: Sequence[ToolCall]) -> str:
    """Canonical text of the symbolic final value (``var_result``'s arguments, else the last call's result)."""
    term = _run(calls, lambda name, args: ("call", name, canonical_json(_freeze(args))),
                lambda value, fld: ("field", value, fld))
    return canonical_json(_freeze(term))


def _num(x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        try:
            return float(x)
        except (TypeError, ValueError):
            raise ExecutionError(f"not a number: {x!r}") from None
    return x


# NESTFUL v2's MathQA-style functions: arguments positional (``arg_0``, ``arg_1``...), the value under ``result``.
MATH_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: _num(a) + _num(b),
    "subtract": lambda a, b: _num(a) - _num(b),
    "multiply": lambda a, b: _num(a) * _num(b),
    "divide": lambda a, b: _num(a) / _num(b),
    "power": lambda a, b: _num(a) ** _num(b),
    "sqrt": lambda a: math.sqrt(_num(a)),
    "cube_root": lambda a: math.copysign(abs(_num(a)) ** (1 / 3), _num(a)),
    "log": lambda a, base=math.e: math.log(_num(a), _num(base)),
    "inverse": lambda a: 1 / _num(a),
    "negate": lambda a: -_num(a),
    "negate_prob": lambda a: 1 - _num(a),
    "floor": lambda a: math.floor(_num(a)),
    "ceil": lambda a: math.ceil(_num(a)),
    "round": lambda a, nd=0: round(_num(a), int(_num(nd))),
    "max_number": lambda a, b: max(_num(a), _num(b)),
    "min_number": lambda a, b: min(_num(a), _num(b)),
    "remainder": lambda a, b: _num(a) % _num(b),
    "gcd": lambda a, b: math.gcd(int(_num(a)), int(_num(b))),
    "lcm": lambda a, b: math.lcm(int(_num(a)), int(_num(b))),
    "factorial": lambda a: math.factorial(int(_num(a))),
    "choose": lambda n, k: math.comb(int(_num(n)), int(_num(k))),
    "permutation": lambda n, k: math.perm(int(_num(n)), int(_num(k))),
    "square_area": lambda a: _num(a) ** 2,
    "square_perimeter": lambda a: 4 * _num(a),
    "square_edge_by_area": lambda a: math.sqrt(_num(a)),
    "square_edge_by_perimeter": lambda a: _num(a) / 4,
    "rectangle_area": lambda a, b: _num(a) * _num(b),
    "rectangle_perimeter": lambda a, b: 2 * (_num(a) + _num(b)),
    "rhombus_area": lambda a, b: _num(a) * _num(b) / 2,
    "rhombus_perimeter": lambda a: 4 * _num(a),
    "triangle_area": lambda b, h: _num(b) * _num(h) / 2,
    "triangle_perimeter": lambda a, b, c: _num(a) + _num(b) + _num(c),
    "triangle_area_three_edges": lambda a, b, c: _heron(_num(a), _num(b), _num(c)),
    "diagonal": lambda a, b: math.hypot(_num(a), _num(b)),
    "circle_area": lambda r: math.pi * _num(r) ** 2,
    "circumface": lambda r: 2 * math.pi * _num(r),
    "circumference": lambda r: 2 * math.pi * _num(r),
    "surface_cube": lambda a: 6 * _num(a) ** 2,
    "volume_cube": lambda a: _num(a) ** 3,
    "surface_rectangular_prism": lambda a, b, c: 2 * (_num(a) * _num(b) + _num(b) * _num(c) + _num(a) * _num(c)),
    "volume_rectangular_prism": lambda a, b, c: _num(a) * _num(b) * _num(c),
    "surface_sphere": lambda r: 4 * math.pi * _num(r) ** 2,
    "volume_sphere": lambda r: 4 / 3 * math.pi * _num(r) ** 3,
    "surface_cylinder": lambda r, h: 2 * math.pi * _num(r) * (_num(r) + _num(h)),
    "volume_cylinder": lambda r, h: math.pi * _num(r) ** 2 * _num(h),
    "volume_cone": lambda r, h: math.pi * _num(r) ** 2 * _num(h) / 3,
    "speed": lambda d, t: _num(d) / _num(t),
    "original_price_before_gain": lambda gain, price: _num(price) * 100 / (100 + _num(gain)),
    "original_price_before_loss": lambda loss, price: _num(price) * 100 / (100 - _num(loss)),
    "p_after_gain": lambda gain, price: (1 + _num(gain) / 100) * _num(price),
    "square_root": lambda a: math.sqrt(_num(a)),
}


def _heron(a: float, b: float, c: float) -> float:
    s = (a + b + c) / 2
    return math.sqrt(s * (s - a) * (s - b) * (s - c))


class MathLibrary:
    """Executor for the math functions above; arguments are passed positionally in ``arg_0, arg_1, ...`` order."""

    def covers(self, calls: Sequence[ToolCall]) -> bool:
        return all(c.name in MATH_FUNCTIONS or c.name == RESULT_CALL for c in calls)

    def _call(self, name: str, args: dict) -> dict:
        fn = MATH_FUNCTIONS.get(name)
        if fn is None:
            raise ExecutionError(f"function {name!r} is not in the executable library")
        positional = [args[k] for k in sorted(args, key=_arg_index)]
        try:
            return {"result": fn(*positional)}
        except ExecutionError:
            raise
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
            raise ExecutionError(f"{name}{tuple(positional)!r}: {e}") from None

    def run(self, calls: Sequence[ToolCall]) -> Any:
        """The final value (``result`` of the last call, or ``var_result``'s arguments)."""
        out = _run(calls, self._call, _dict_field)
        return out["result"] if isinstance(out, dict) and set(out) == {"result"} else out


def _arg_index(key: str) -> tuple[int, str]:
    m = re.fullmatch(r"arg_?(\d+)", key)
    return (int(m.group(1)), key) if m else (10**6, key)


def _dict_field(value: Any, fld: str) -> Any:
    if isinstance(value, Mapping) and fld in value:
        return value[fld]
    raise ExecutionError(f"result has no field {fld!r}")


def same_answer(a: Any, b: Any, rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> bool:
    """Equality of final answers; numbers compared with a small tolerance."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_answer(x, y, rel_tol, abs_tol) for x, y in zip(a, b))
    return a == b
