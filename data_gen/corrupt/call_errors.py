"""Call-level errors: the ``name``, ``content`` and ``order`` classes, each a change to the gold call list.

An operation is ``op(calls, tools, fmt, rng) -> (new calls, detail) | None``: ``tools`` are the tool specs by name
(``refiner.specs.ToolSpec``; may be empty), ``fmt`` the wire format the calls will be written in, ``detail`` says
what changed; ``None`` means the class does not apply to these calls (no arguments to rename, a format that is not
order-sensitive, no steps...). :data:`CALL_OPS` maps each class to its operation.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from data_gen.corrupt import mutations
from refiner.calls import ToolCall, has_steps
from refiner.formats import WireFormat
from refiner.specs import ToolSpec

CallOp = Callable[
    [list[ToolCall], Mapping[str, ToolSpec], WireFormat, random.Random], "tuple[list[ToolCall], str] | None"
]


def _replace(calls: list[ToolCall], i: int, **changes: Any) -> list[ToolCall]:
    c = calls[i]
    new = ToolCall(
        changes.get("name", c.name), changes.get("arguments", dict(c.arguments)), c.outputs, changes.get("step", c.step)
    )
    return calls[:i] + [new] + calls[i + 1 :]


def _with_args(calls: list[ToolCall]) -> list[int]:
    return [i for i, c in enumerate(calls) if c.arguments]


# ---------------------------------------------------------------------------------------------------------------
# name


def tool_name_typo(calls, tools, fmt, rng):
    if not calls:
        return None
    i = rng.randrange(len(calls))
    name = calls[i].name
    new = mutations.typo(name, rng)
    if new in tools or new == name:
        return None
    return _replace(calls, i, name=new), f"call {i}: tool name {name!r} -> {new!r}"


def tool_name_near_miss(calls, tools, fmt, rng):
    if not calls:
        return None
    i = rng.randrange(len(calls))
    name = calls[i].name
    others = [t for t in tools if t != name]
    new = rng.choice(others) if others and rng.random() < 0.6 else mutations.near_miss_name(name, rng)
    if new == name:
        return None
    return _replace(calls, i, name=new), f"call {i}: tool {name!r} -> {new!r}"


def _rename_key(args: Mapping[str, Any], old: str, new: str) -> dict[str, Any]:
    return {(new if k == old else k): v for k, v in args.items()}


def _pick_arg(calls: Sequence[ToolCall], rng: random.Random) -> tuple[int, str] | None:
    """A seeded ``(call index, parameter name)`` among the calls that have arguments; None when none has."""
    idx = _with_args(calls)
    if not idx:
        return None
    i = rng.choice(idx)
    return i, rng.choice(list(calls[i].arguments))


def _rename_param(calls, rng, new_name: Callable[[str, random.Random], str]):
    """Renames one seeded parameter to ``new_name(key, rng)``; None when there is none or that name is taken."""
    if (picked := _pick_arg(calls, rng)) is None:
        return None
    i, key = picked
    args = calls[i].arguments
    new = new_name(key, rng)
    if new in args:
        return None
    return _replace(calls, i, arguments=_rename_key(args, key, new)), f"call {i}: parameter {key!r} -> {new!r}"


def param_name_typo(calls, tools, fmt, rng):
    return _rename_param(calls, rng, mutations.typo)


def param_name_synonym(calls, tools, fmt, rng):
    return _rename_param(calls, rng, mutations.param_synonym)


# ---------------------------------------------------------------------------------------------------------------
# content


def missing_required_param(calls, tools, fmt, rng):
    candidates = []
    for i in _with_args(calls):
        spec = tools.get(calls[i].name)
        keys = [k for k in calls[i].arguments if spec is None or not spec.required or k in spec.required]
        candidates += [(i, k) for k in keys]
    if not candidates:
        return None
    i, key = rng.choice(candidates)
    args = {k: v for k, v in calls[i].arguments.items() if k != key}
    return _replace(calls, i, arguments=args), f"call {i}: dropped parameter {key!r}"


def extra_param(calls, tools, fmt, rng):
    if not calls or fmt.names_only:
        return None  # a names-only format carries no arguments
    i = rng.randrange(len(calls))
    args = dict(calls[i].arguments)
    spec = tools.get(calls[i].name)
    unused = [p for p in (spec.params if spec else ()) if p not in args]
    if unused and rng.random() < 0.6:
        key = rng.choice(unused)
        value = mutations.plausible_value(spec, key, rng)
    else:
        key, value = rng.choice([kv for kv in mutations.EXTRA_PARAMS if kv[0] not in args] or [("extra", "value")])
    if key in args:
        return None
    args[key] = value
    return _replace(calls, i, arguments=args), f"call {i}: added parameter {key!r}={value!r}"


def _revalue(calls, rng, new_value: Callable[[int, str, Any], Any], change: str):
    """Gives one seeded parameter the value ``new_value(call index, key, old value)``; ``change`` words it."""
    if (picked := _pick_arg(calls, rng)) is None:
        return None
    i, key = picked
    args = dict(calls[i].arguments)
    new = new_value(i, key, args[key])
    args[key] = new
    return _replace(calls, i, arguments=args), f"call {i}: {key!r}{change} -> {new!r}"


def value_type_drift(calls, tools, fmt, rng):
    return _revalue(calls, rng, lambda i, key, old: mutations.drift(old, rng), " type drift")


def wrong_value(calls, tools, fmt, rng):
    placeholders = [o for c in calls for o in c.outputs]

    def wrong(i: int, key: str, old: Any) -> Any:
        spec = tools.get(calls[i].name)
        param = spec.params.get(key) if spec else None
        enum = param.enum if param is not None and param.enum else None
        return mutations.wrong_value(old, rng, enum=enum, placeholders=placeholders)

    return _revalue(calls, rng, wrong, "")


# ---------------------------------------------------------------------------------------------------------------
# left to the model: the narrow name and content errors the default tier 1 does not repair


def _declared_type(tools: Mapping[str, ToolSpec], name: str, key: str) -> str:
    spec = tools.get(name)
    param = spec.params.get(key) if spec else None
    return str((param.type if param else None) or "").lower()


def _arg_where(calls: Sequence[ToolCall], rng: random.Random, keep: Callable[[int, str, Any], bool]):
    """A seeded ``(call index, parameter name)`` among the arguments ``keep(i, key, value)`` accepts; None if none."""
    found = [(i, k) for i in _with_args(calls) for k, v in calls[i].arguments.items() if keep(i, k, v)]
    return rng.choice(found) if found else None


def param_name_case(calls, tools, fmt, rng):
    def other(i: int, key: str, value: Any) -> bool:
        new = mutations.other_case(key, random.Random(0))
        spec = tools.get(calls[i].name)
        return new is not None and not (spec and new in spec.params)

    if (picked := _arg_where(calls, rng, other)) is None:
        return None
    i, key = picked
    spec = tools.get(calls[i].name)
    args = calls[i].arguments
    new = mutations.other_case(key, rng)
    if new is None or new in args or (spec and new in spec.params):
        return None
    return _replace(calls, i, arguments=_rename_key(args, key, new)), f"call {i}: parameter {key!r} -> {new!r}"


def number_as_text(calls, tools, fmt, rng):
    def number(i: int, key: str, value: Any) -> bool:
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and not _declared_type(tools, calls[i].name, key).startswith("str"))

    if (picked := _arg_where(calls, rng, number)) is None:
        return None
    i, key = picked
    old = calls[i].arguments[key]
    args = {**calls[i].arguments, key: str(old)}
    return _replace(calls, i, arguments=args), f"call {i}: {key!r} {old!r} -> {str(old)!r}"


def one_item_list(calls, tools, fmt, rng):
    def scalar(i: int, key: str, value: Any) -> bool:
        return (isinstance(value, (str, int, float)) and not isinstance(value, bool)
                and not _declared_type(tools, calls[i].name, key).startswith(("list", "array", "tuple")))

    if (picked := _arg_where(calls, rng, scalar)) is None:
        return None
    i, key = picked
    old = calls[i].arguments[key]
    args = {**calls[i].arguments, key: [old]}
    return _replace(calls, i, arguments=args), f"call {i}: {key!r} {old!r} -> {[old]!r}"


def undeclared_param(calls, tools, fmt, rng):
    if fmt.names_only:
        return None
    declared = [i for i, c in enumerate(calls) if c.name in tools]
    if not declared:
        return None  # "undeclared" needs the tool's spec
    i = rng.choice(declared)
    spec, args = tools[calls[i].name], dict(calls[i].arguments)
    extras = [kv for kv in mutations.EXTRA_PARAMS if kv[0] not in args and kv[0] not in spec.params]
    if not extras:
        return None
    key, value = rng.choice(extras)
    args[key] = value
    return _replace(calls, i, arguments=args), f"call {i}: added undeclared parameter {key!r}={value!r}"


# ---------------------------------------------------------------------------------------------------------------
# order (steps: the simplified order format's numbered groups)


def _groups(calls: Sequence[ToolCall]) -> list[list[ToolCall]]:
    by: dict[int, list[ToolCall]] = {}
    for c in calls:
        by.setdefault(c.step, []).append(c)
    return [by[k] for k in sorted(by)]


def _from_groups(groups: Sequence[Sequence[ToolCall]]) -> list[ToolCall]:
    groups = [g for g in groups if g]
    return [ToolCall(c.name, dict(c.arguments), c.outputs, k + 1) for k, g in enumerate(groups) for c in g]


def swapped_calls(calls, tools, fmt, rng):
    if not fmt.order_sensitive:
        return None
    if has_steps(calls):
        groups = _groups(calls)
        if len(groups) < 2:
            return None
        i = rng.randrange(len(groups) - 1)
        groups[i], groups[i + 1] = groups[i + 1], groups[i]
        return _from_groups(groups), f"steps {i + 1} and {i + 2} swapped"
    pairs = [i for i in range(len(calls) - 1) if calls[i] != calls[i + 1]]
    if not pairs:
        return None
    i = rng.choice(pairs)
    new = list(calls)
    new[i], new[i + 1] = new[i + 1], new[i]
    return new, f"calls {i} and {i + 1} swapped"


def shuffled_order(calls, tools, fmt, rng):
    if not fmt.order_sensitive:
        return None
    items: list = _groups(calls) if has_steps(calls) else list(calls)
    if len(items) < 2 or all(x == items[0] for x in items):
        return None
    for _ in range(20):
        perm = list(range(len(items)))
        rng.shuffle(perm)
        if perm != sorted(perm):
            break
    else:
        return None
    shuffled = [items[p] for p in perm]
    new = _from_groups(shuffled) if has_steps(calls) else shuffled
    return new, f"order shuffled: {perm}"


def split_step(calls, tools, fmt, rng):
    if not has_steps(calls):
        return None
    groups = _groups(calls)
    big = [k for k, g in enumerate(groups) if len(g) >= 2]
    if not big:
        return None
    k = rng.choice(big)
    g = list(groups[k])
    rng.shuffle(g)
    cut = rng.randrange(1, len(g))
    groups = groups[:k] + [g[:cut], g[cut:]] + groups[k + 1 :]
    return _from_groups(groups), f"step {k + 1} split in two"


def merge_steps(calls, tools, fmt, rng):
    if not has_steps(calls):
        return None
    groups = _groups(calls)
    if len(groups) < 2:
        return None
    k = rng.randrange(len(groups) - 1)
    if rng.random() < 0.5 or len(groups[k + 1]) < 2:
        groups = groups[:k] + [groups[k] + groups[k + 1]] + groups[k + 2 :]
        return _from_groups(groups), f"steps {k + 1} and {k + 2} merged"
    moved = groups[k + 1][0]
    groups[k] = groups[k] + [moved]
    groups[k + 1] = groups[k + 1][1:]
    return _from_groups(groups), f"tool {moved.name!r} moved from step {k + 2} to step {k + 1}"


CALL_OPS: dict[str, CallOp] = {
    "tool_name_typo": tool_name_typo,
    "tool_name_near_miss": tool_name_near_miss,
    "param_name_typo": param_name_typo,
    "param_name_synonym": param_name_synonym,
    "missing_required_param": missing_required_param,
    "extra_param": extra_param,
    "value_type_drift": value_type_drift,
    "wrong_value": wrong_value,
    "swapped_calls": swapped_calls,
    "shuffled_order": shuffled_order,
    "split_step": split_step,
    "merge_steps": merge_steps,
    "param_name_case": param_name_case,
    "number_as_text": number_as_text,
    "one_item_list": one_item_list,
    "undeclared_param": undeclared_param,
}
