"""Seeded, model-free corruption of gold tool calls into a plausible upstream mistake.

``corrupt(calls, fmt, tools, rng, classes=None) -> Corruption(text, error_classes, calls)`` renders the gold calls in
wire format ``fmt`` with one (or ``n_errors``) seeded errors drawn from ``classes`` (error-class or group names; all
classes by default) and labels the result. Classes fall in four groups:

- ``format``: the text itself is broken (``broken_json``, ``missing_tag``, ``wrong_tag``, ``wrong_format``); the
  result never parses strictly and ``Corruption.calls`` is ``None``.
- ``name``: tool-name typos and near-miss names (another tool from the list, or a look-alike), parameter-name typos
  and synonyms.
- ``content``: a dropped required parameter, an extra parameter, value type drift (``12`` -> ``"12"``), a wrong value.
- ``order``: swapped calls, a shuffled nested order (order-sensitive formats), split or merged steps (``order``).

Every returned corruption changes something: its text either fails ``parse_strict`` in ``fmt`` or parses to calls
that differ from the gold (as a sequence for order-sensitive formats, as a multiset otherwise, by step groups for the
``order`` format). Attempts that change nothing are rejected, retried, and counted in ``Corruption.rejected``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from refiner import formats
from refiner.calls import ToolCall, calls_equal, steps_of
from refiner.formats import FormatError, WireFormat

ERROR_GROUPS: dict[str, tuple[str, ...]] = {
    "format": ("broken_json", "missing_tag", "wrong_tag", "wrong_format"),
    "name": ("tool_name_typo", "tool_name_near_miss", "param_name_typo", "param_name_synonym"),
    "content": ("missing_required_param", "extra_param", "value_type_drift", "wrong_value"),
    "order": ("swapped_calls", "shuffled_order", "split_step", "merge_steps"),
}
ERROR_CLASSES: tuple[str, ...] = tuple(c for group in ERROR_GROUPS.values() for c in group)
TEXT_CLASSES = frozenset(ERROR_GROUPS["format"])
GROUP_OF: dict[str, str] = {c: g for g, cs in ERROR_GROUPS.items() for c in cs}


class CorruptionError(ValueError):
    """No corruption of the requested classes applies to these calls (or none changed anything)."""


@dataclass(frozen=True)
class Corruption:
    """A corrupted upstream text and its label. ``calls`` is the corrupted call list, or ``None`` when the text
    itself is broken (format classes). ``rejected`` counts attempts discarded because they changed nothing."""

    text: str
    error_classes: tuple[str, ...]
    calls: list[ToolCall] | None
    details: tuple[str, ...] = ()
    rejected: int = 0

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(GROUP_OF[c] for c in self.error_classes))


# ---------------------------------------------------------------------------------------------------------------
# Tool information (duck-typed: refiner.specs.ToolSpec, or raw dicts in any dialect)


@dataclass
class _ToolInfo:
    name: str
    params: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    enums: dict[str, list] = field(default_factory=dict)
    types: dict[str, str | None] = field(default_factory=dict)


def _tool_info(tools: Iterable[Any] | None) -> dict[str, _ToolInfo]:
    out: dict[str, _ToolInfo] = {}
    tools = list(tools or [])
    if tools and isinstance(tools[0], Mapping):
        try:
            from refiner.specs import load_tools

            tools = load_tools(tools)
        except Exception:  # specs module absent or dialect unknown: read the common fields directly
            for t in tools:
                info = _info_from_dict(t)
                if info:
                    out[info.name] = info
            return out
    for t in tools:
        name = getattr(t, "name", None)
        if not isinstance(name, str):
            continue
        params = dict(getattr(t, "params", {}) or {})
        out[name] = _ToolInfo(
            name=name,
            params=tuple(params),
            required=tuple(getattr(t, "required", ()) or ()),
            enums={k: list(p.enum) for k, p in params.items() if getattr(p, "enum", None)},
            types={k: getattr(p, "type", None) for k, p in params.items()},
        )
    return out


def _info_from_dict(t: Mapping) -> _ToolInfo | None:
    t = t.get("function", t) if isinstance(t.get("function"), Mapping) else t
    name = t.get("name") or t.get("api_name")
    if not isinstance(name, str):
        return None
    params = t.get("parameters") or {}
    if isinstance(params, Mapping) and isinstance(params.get("properties"), Mapping):
        required = params.get("required") or t.get("required") or ()
        params = params["properties"]
    else:
        required = t.get("required") or ()
    params = params if isinstance(params, Mapping) else {}
    return _ToolInfo(
        name=name,
        params=tuple(params),
        required=tuple(r for r in required if isinstance(r, str)) if isinstance(required, (list, tuple)) else (),
        enums={k: list(v["enum"]) for k, v in params.items() if isinstance(v, Mapping) and v.get("enum")},
        types={k: (v.get("type") if isinstance(v, Mapping) else None) for k, v in params.items()},
    )


# ---------------------------------------------------------------------------------------------------------------
# String mutations


_NEIGHBOURS = "qwertyuiopasdfghjklzxcvbnm"


def _typo(word: str, rng: random.Random) -> str:
    """A look-alike misspelling of ``word`` (never ``word`` itself)."""
    for _ in range(20):
        ops = ["swap", "drop", "double", "replace", "underscore", "case"]
        op = rng.choice(ops)
        w = word
        n = len(w)
        if op == "swap" and n >= 2:
            i = rng.randrange(n - 1)
            w = w[:i] + w[i + 1] + w[i] + w[i + 2 :]
        elif op == "drop" and n >= 3:
            i = rng.randrange(n)
            w = w[:i] + w[i + 1 :]
        elif op == "double" and n >= 1:
            i = rng.randrange(n)
            w = w[:i] + w[i] + w[i:]
        elif op == "replace" and n >= 1:
            letters = [i for i, ch in enumerate(w) if ch.isalpha()]
            if letters:
                i = rng.choice(letters)
                w = w[:i] + rng.choice(_NEIGHBOURS) + w[i + 1 :]
        elif op == "underscore" and "_" in w:
            w = w.replace("_", rng.choice(["", "-", "__"]), 1)
        elif op == "case" and any(ch.isalpha() for ch in w):
            w = _camel(w) if "_" in w else w.capitalize() if w[0].islower() else w.lower()
        if w and w != word:
            return w
    return word + "_"


def _camel(name: str) -> str:
    parts = [p for p in re.split(r"[_\s\-]+", name) if p]
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:]) if parts else name


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


_VERBS = [
    ("get", "fetch"), ("get", "retrieve"), ("search", "find"), ("find", "lookup"), ("create", "make"),
    ("create", "add"), ("calculate", "compute"), ("calculate", "calc"), ("send", "post"), ("update", "set"),
    ("delete", "remove"), ("check", "verify"), ("list", "get_all"), ("generate", "create"), ("convert", "transform"),
]

_PARAM_SYNONYMS: dict[str, list[str]] = {
    "location": ["city", "place", "loc"], "city": ["location", "town"], "query": ["q", "search_query", "keyword"],
    "keyword": ["query", "term"], "date": ["day", "on_date"], "start_date": ["from_date", "begin_date"],
    "end_date": ["to_date", "until"], "name": ["title", "full_name"], "title": ["name", "heading"],
    "amount": ["value", "sum"], "from_currency": ["source_currency", "from"], "to_currency": ["target_currency", "to"],
    "limit": ["max_results", "count"], "language": ["lang", "locale"], "text": ["content", "message"],
    "message": ["text", "body"], "email": ["email_address", "mail"], "id": ["identifier", "uid"],
    "length": ["size", "len"], "number": ["num", "n"], "symbol": ["ticker", "stock_symbol"],
    "price": ["cost", "amount"], "weight": ["mass", "weight_kg"], "height": ["height_m", "tall"],
    "category": ["type", "genre"], "type": ["kind", "category"], "url": ["link", "website"],
    "recipient": ["to", "receiver"], "subject": ["topic", "title"], "description": ["desc", "details"],
}


def _param_synonym(key: str, rng: random.Random) -> str:
    options = list(_PARAM_SYNONYMS.get(key, []))
    options += [_camel(key)] if "_" in key else []
    options += [key + "_value", key + "_name", key.rstrip("s") if key.endswith("s") else key + "s"]
    if "_" in key:
        options.append(key.split("_")[-1])
        options.append(key.split("_")[0])
    options = [o for o in dict.fromkeys(options) if o and o != key]
    return rng.choice(options)


def _near_miss_name(name: str, rng: random.Random) -> str:
    options = []
    low = name.lower()
    for a, b in _VERBS:
        for x, y in ((a, b), (b, a)):
            if low.startswith(x + "_") or low.startswith(x) and len(low) > len(x) and name[len(x)].isupper():
                options.append(y + name[len(x) :])
    options += [name + "_info", name + "_data", name + "s" if not name.endswith("s") else name[:-1]]
    options += [_camel(name)] if "_" in name else [_snake(name)] if _snake(name) != name else []
    options = [o for o in dict.fromkeys(options) if o != name]
    return rng.choice(options)


# ---------------------------------------------------------------------------------------------------------------
# Value mutations

_PLACEHOLDER = re.compile(r"^(API_call_)(\d+)$")


def _drift(value: Any, rng: random.Random) -> Any:
    """Same content, another JSON type (``12`` -> ``"12"``, ``"true"`` -> ``true``, ``[a]`` -> ``"[a]"``)."""
    if isinstance(value, bool):
        return rng.choice(["true", "True", str(value).lower()]) if value else rng.choice(["false", "False"])
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"-?\d+", s):
            return int(s)
        if re.fullmatch(r"-?\d+\.\d+", s):
            return float(s)
        if s.lower() in ("true", "false"):
            return s.lower() == "true"
        return [value]
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "None"
    return str(value)


def _wrong(value: Any, rng: random.Random, enum: Sequence | None = None, placeholders: Sequence[str] = ()) -> Any:
    """Another value of the same JSON type that the request did not ask for."""
    if enum:
        others = [e for e in enum if e != value]
        if others:
            return rng.choice(others)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, -1, 10, 2 * value + 1 if value else 5, -value if value else 3])
    if isinstance(value, float):
        return round(value * rng.choice([0.5, 2.0, 1.1, 10.0]) + rng.choice([0.0, 1.0]), 4) or value + 1.5
    if isinstance(value, str):
        m = _PLACEHOLDER.match(value)
        if m:
            others = [p for p in placeholders if p != value]
            return rng.choice(others) if others else f"API_call_{int(m.group(2)) + 1}"
        return _wrong_string(value, rng)
    if isinstance(value, list):
        if not value:
            return ["unknown"]
        i = rng.randrange(len(value))
        if len(value) > 1 and rng.random() < 0.5:
            return value[:i] + value[i + 1 :]
        return value[:i] + [_wrong(value[i], rng)] + value[i + 1 :]
    if isinstance(value, dict):
        if not value:
            return {"value": "unknown"}
        k = rng.choice(list(value))
        return {**value, k: _wrong(value[k], rng)}
    return "unknown"


def _wrong_string(value: str, rng: random.Random) -> str:
    digits = [i for i, ch in enumerate(value) if ch.isdigit()]
    options = []
    if digits:
        i = rng.choice(digits)
        options.append(value[:i] + str((int(value[i]) + rng.randint(1, 8)) % 10) + value[i + 1 :])
    words = value.split()
    if len(words) > 1:
        j = rng.randrange(len(words))
        options.append(" ".join(words[:j] + words[j + 1 :]))
    if value:
        options.append(_typo(value, rng))
        options.append(value.upper() if value != value.upper() else value.lower())
    options.append(value + rng.choice([" extra", " 2", "s"]) if value else "unknown")
    options = [o for o in options if o != value]
    return rng.choice(options) if options else value + "x"


def _plausible_value(info: _ToolInfo | None, key: str, rng: random.Random) -> Any:
    t = (info.types.get(key) if info else None) or ""
    t = str(t).lower()
    if info and info.enums.get(key):
        return rng.choice(info.enums[key])
    if t.startswith(("int", "integer")):
        return rng.choice([1, 5, 10, 100])
    if t.startswith(("float", "number")):
        return rng.choice([0.5, 1.0, 2.5])
    if t.startswith("bool"):
        return rng.choice([True, False])
    if t.startswith(("list", "array")):
        return []
    if t.startswith(("dict", "object")):
        return {}
    return rng.choice(["default", "all", "en", "auto", "latest"])


_EXTRA_PARAMS = [("verbose", True), ("limit", 10), ("language", "en"), ("format", "json"), ("timeout", 30),
                 ("include_details", True), ("sort_by", "relevance"), ("units", "metric")]


# ---------------------------------------------------------------------------------------------------------------
# Call-level operations: (calls, tools, fmt, rng) -> (new calls, detail) or None when not applicable

CallOp = Callable[[list[ToolCall], dict[str, _ToolInfo], WireFormat, random.Random], "tuple[list[ToolCall], str] | None"]


def _replace(calls: list[ToolCall], i: int, **changes: Any) -> list[ToolCall]:
    c = calls[i]
    new = ToolCall(
        changes.get("name", c.name), changes.get("arguments", dict(c.arguments)), c.outputs, changes.get("step", c.step)
    )
    return calls[:i] + [new] + calls[i + 1 :]


def _with_args(calls: list[ToolCall]) -> list[int]:
    return [i for i, c in enumerate(calls) if c.arguments]


def _op_tool_name_typo(calls, tools, fmt, rng):
    if not calls:
        return None
    i = rng.randrange(len(calls))
    name = calls[i].name
    new = _typo(name, rng)
    if new in tools or new == name:
        return None
    return _replace(calls, i, name=new), f"call {i}: tool name {name!r} -> {new!r}"


def _op_tool_name_near_miss(calls, tools, fmt, rng):
    if not calls:
        return None
    i = rng.randrange(len(calls))
    name = calls[i].name
    others = [t for t in tools if t != name]
    new = rng.choice(others) if others and rng.random() < 0.6 else _near_miss_name(name, rng)
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


def _op_param_name_typo(calls, tools, fmt, rng):
    return _rename_param(calls, rng, _typo)


def _op_param_name_synonym(calls, tools, fmt, rng):
    return _rename_param(calls, rng, _param_synonym)


def _op_missing_required_param(calls, tools, fmt, rng):
    candidates = []
    for i in _with_args(calls):
        info = tools.get(calls[i].name)
        keys = [k for k in calls[i].arguments if info is None or not info.required or k in info.required]
        candidates += [(i, k) for k in keys]
    if not candidates:
        return None
    i, key = rng.choice(candidates)
    args = {k: v for k, v in calls[i].arguments.items() if k != key}
    return _replace(calls, i, arguments=args), f"call {i}: dropped parameter {key!r}"


def _op_extra_param(calls, tools, fmt, rng):
    if not calls or fmt.names_only:
        return None  # a names-only format carries no arguments
    i = rng.randrange(len(calls))
    args = dict(calls[i].arguments)
    info = tools.get(calls[i].name)
    unused = [p for p in (info.params if info else ()) if p not in args]
    if unused and rng.random() < 0.6:
        key = rng.choice(unused)
        value = _plausible_value(info, key, rng)
    else:
        key, value = rng.choice([kv for kv in _EXTRA_PARAMS if kv[0] not in args] or [("extra", "value")])
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


def _op_value_type_drift(calls, tools, fmt, rng):
    return _revalue(calls, rng, lambda i, key, old: _drift(old, rng), " type drift")


def _op_wrong_value(calls, tools, fmt, rng):
    placeholders = [o for c in calls for o in c.outputs]

    def wrong(i: int, key: str, old: Any) -> Any:
        info = tools.get(calls[i].name)
        return _wrong(old, rng, enum=info.enums.get(key) if info else None, placeholders=placeholders)

    return _revalue(calls, rng, wrong, "")


def _has_steps(calls: Sequence[ToolCall]) -> bool:
    return bool(calls) and all(c.step is not None for c in calls)


def _groups(calls: Sequence[ToolCall]) -> list[list[ToolCall]]:
    by: dict[int, list[ToolCall]] = {}
    for c in calls:
        by.setdefault(c.step, []).append(c)
    return [by[k] for k in sorted(by)]


def _from_groups(groups: Sequence[Sequence[ToolCall]]) -> list[ToolCall]:
    groups = [g for g in groups if g]
    return [ToolCall(c.name, dict(c.arguments), c.outputs, k + 1) for k, g in enumerate(groups) for c in g]


def _op_swapped_calls(calls, tools, fmt, rng):
    if not fmt.order_sensitive:
        return None
    if _has_steps(calls):
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


def _op_shuffled_order(calls, tools, fmt, rng):
    if not fmt.order_sensitive:
        return None
    items: list = _groups(calls) if _has_steps(calls) else list(calls)
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
    new = _from_groups(shuffled) if _has_steps(calls) else shuffled
    return new, f"order shuffled: {perm}"


def _op_split_step(calls, tools, fmt, rng):
    if not _has_steps(calls):
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


def _op_merge_steps(calls, tools, fmt, rng):
    if not _has_steps(calls):
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
    "tool_name_typo": _op_tool_name_typo,
    "tool_name_near_miss": _op_tool_name_near_miss,
    "param_name_typo": _op_param_name_typo,
    "param_name_synonym": _op_param_name_synonym,
    "missing_required_param": _op_missing_required_param,
    "extra_param": _op_extra_param,
    "value_type_drift": _op_value_type_drift,
    "wrong_value": _op_wrong_value,
    "swapped_calls": _op_swapped_calls,
    "shuffled_order": _op_shuffled_order,
    "split_step": _op_split_step,
    "merge_steps": _op_merge_steps,
}

# ---------------------------------------------------------------------------------------------------------------
# Text-level operations: (text, fmt, calls, rng) -> (new text, detail) or None

TextOp = Callable[[str, WireFormat, list[ToolCall], random.Random], "tuple[str, str] | None"]


def _tag_spans(text: str, fmt: WireFormat) -> list[tuple[int, int]]:
    spans = []
    for tag in fmt.tags:
        start = 0
        while (i := text.find(tag, start)) >= 0:
            spans.append((i, i + len(tag)))
            start = i + len(tag)
    return spans


def _op_broken_json(text, fmt, calls, rng):
    tags = _tag_spans(text, fmt)

    def free(i: int) -> bool:
        return not any(a <= i < b for a, b in tags)

    structural = [i for i, ch in enumerate(text) if ch in '{}[]()"' and free(i)]
    closers = [i for i, ch in enumerate(text) if ch in "}]" and free(i)]
    seps = [i for i, ch in enumerate(text) if ch in ":,=" and free(i)]
    ops = []
    if structural:
        ops.append("drop")
    if closers:
        ops += ["trailing_comma", "extra_closer"]
    if seps:
        ops.append("drop_sep")
    if '"' in text:
        ops.append("single_quotes")
    if not ops:
        return None
    op = rng.choice(ops)
    if op == "drop":
        i = rng.choice(structural)
        return text[:i] + text[i + 1 :], f"dropped {text[i]!r} at {i}"
    if op == "drop_sep":
        i = rng.choice(seps)
        return text[:i] + text[i + 1 :], f"dropped {text[i]!r} at {i}"
    if op == "trailing_comma":
        i = rng.choice(closers)
        return text[:i] + "," + text[i:], f"trailing comma before {text[i]!r} at {i}"
    if op == "extra_closer":
        i = rng.choice(closers)
        return text[: i + 1] + text[i] + text[i + 1 :], f"duplicated {text[i]!r} at {i}"
    body_start = min((b for a, b in tags), default=0) if tags else 0
    return text[:body_start] + text[body_start:].replace('"', "'"), "double quotes replaced by single quotes"


def _op_missing_tag(text, fmt, calls, rng):
    present = [t for t in dict.fromkeys(fmt.tags) if t and t in text]
    if not present:
        return None
    choice = rng.choice(present + ["all"] if len(present) > 1 else present)
    if choice == "all":
        for t in present:
            text = text.replace(t, "")
        return text.strip(), "all special tags removed"
    return text.replace(choice, "", 1).strip(), f"tag {choice!r} removed"


def _tag_variant(tag: str, rng: random.Random, others: Sequence[str]) -> str | None:
    """A look-alike of the special tag ``tag`` (or one of ``others``), or ``None`` when ``tag`` has no letters to
    misspell (a bare bracket marker such as NESTFUL's ``[``: changing it is a JSON error, not a wrong tag)."""
    if not any(ch.isalpha() for ch in tag):
        return None
    options = []
    if tag.startswith("</"):
        options.append("<" + tag[2:])  # closing tag written as an opening one
    if "_" in tag:
        options.append(tag.replace("_", "", 1))
        options.append(tag.replace("_", "-", 1))
    else:
        inner = re.sub(r"[</>|]", "", tag)
        if len(inner) > 4:
            cut = len(inner) // 2
            options.append(tag.replace(inner, inner[:cut] + "_" + inner[cut:], 1))
    if tag.endswith(">"):
        options.append(tag[:-1])
    if tag.startswith("<"):
        options.append("[" + tag[1:-1] + "]" if tag.endswith(">") else "[" + tag[1:])
    options.append(tag.upper() if tag != tag.upper() else tag.lower())
    options += [o for o in others if o != tag]
    options = [o for o in dict.fromkeys(options) if o != tag and o]
    return rng.choice(options) if options else None


def _op_wrong_tag(text, fmt, calls, rng):
    """One special tag of ``fmt`` misspelt or swapped for another format's; ``None`` (not applicable) when the text
    holds no tag that can be misspelt."""
    present = [t for t in dict.fromkeys(fmt.tags) if t and t in text]
    if not present:
        return None
    first = rng.choice(present)
    other_tags = [t for f in formats.all_formats() if f.name != fmt.name for t in f.tags if t not in fmt.tags]
    for tag in [first] + [t for t in present if t != first]:
        new = _tag_variant(tag, rng, other_tags if rng.random() < 0.3 else [])
        if new is not None:
            return text.replace(tag, new, 1), f"tag {tag!r} written as {new!r}"
    return None


_KEY_SWAPS = [('"arguments"', '"parameters"'), ('"parameters"', '"arguments"'), ('"api_name"', '"name"'),
              ('"name"', '"function"'), ('"tool_list"', '"tools"'), ('"step"', '"order"'), ('"responses"', '"outputs"')]


def _op_wrong_format(text, fmt, calls, rng):
    if rng.random() < 0.35:
        swaps = [(a, b) for a, b in _KEY_SWAPS if a in text]
        if swaps:
            a, b = rng.choice(swaps)
            return text.replace(a, b), f"key {a} written as {b}"
    # (a names-only format cannot carry the arguments of ordinary calls: never a "wrong family" target)
    targets = [f for f in formats.all_formats() if f.name != fmt.name and not f.names_only]
    rng.shuffle(targets)
    for other in targets:
        try:
            rendered = other.render(calls)
        except Exception:  # a family that cannot express these calls is simply not a candidate
            continue
        if rendered.strip() and rendered != text:
            return rendered, f"written in the {other.name} format instead of {fmt.name}"
    return None


TEXT_OPS: dict[str, TextOp] = {
    "broken_json": _op_broken_json,
    "missing_tag": _op_missing_tag,
    "wrong_tag": _op_wrong_tag,
    "wrong_format": _op_wrong_format,
}

assert set(CALL_OPS) | set(TEXT_OPS) == set(ERROR_CLASSES)


# ---------------------------------------------------------------------------------------------------------------
# The check and the entry point


def same_calls(a: Sequence[ToolCall], b: Sequence[ToolCall], fmt: WireFormat | str) -> bool:
    """Whether two call lists mean the same in ``fmt``: by step groups (order format), in sequence when the format
    is order-sensitive, else as multisets."""
    f = formats.get(fmt) if isinstance(fmt, str) else fmt
    if _has_steps(b) and _has_steps(a):
        return steps_of(a) == steps_of(b) and calls_equal(
            [ToolCall(c.name, dict(c.arguments), c.outputs) for c in a],
            [ToolCall(c.name, dict(c.arguments), c.outputs) for c in b],
            ordered=False,
        )
    return calls_equal(a, b, ordered=f.order_sensitive)


def changes_something(text: str, gold: Sequence[ToolCall], fmt: WireFormat | str) -> bool:
    """True when ``text`` is not a correct rendering of ``gold`` in ``fmt`` (it fails ``parse_strict`` or its calls
    differ)."""
    f = formats.get(fmt) if isinstance(fmt, str) else fmt
    try:
        parsed = f.parse_strict(text)
    except FormatError:
        return True
    return not same_calls(parsed, gold, f)


def expand_classes(classes: Iterable[str] | str | None) -> list[str]:
    """Error-class names from class and group names (``None``: all classes). Raises on an unknown name."""
    if classes is None:
        return list(ERROR_CLASSES)
    if isinstance(classes, str):
        classes = [classes]
    out: list[str] = []
    for c in classes:
        if c in ERROR_GROUPS:
            out += ERROR_GROUPS[c]
        elif c in ERROR_CLASSES:
            out.append(c)
        else:
            raise ValueError(f"unknown error class or group {c!r}; groups: {sorted(ERROR_GROUPS)}, "
                             f"classes: {', '.join(ERROR_CLASSES)}")
    return list(dict.fromkeys(out))


def corrupt(
    calls: Sequence[ToolCall],
    fmt: str,
    tools: Iterable[Any] | None,
    rng: random.Random | int,
    classes: Iterable[str] | str | None = None,
    *,
    n_errors: int = 1,
    max_tries: int = 40,
) -> Corruption:
    """Renders ``calls`` in ``fmt`` with ``n_errors`` seeded errors drawn from ``classes`` (class or group names).

    Raises :class:`CorruptionError` when none of the classes applies to these calls, or when every attempt changed
    nothing."""
    f = formats.get(fmt)
    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    gold = list(calls)
    pool = expand_classes(classes)
    info = _tool_info(tools)
    rejected = 0
    applied_any = False
    for _ in range(max_tries):
        order = list(pool)
        rng.shuffle(order)
        chosen: list[str] = []
        details: list[str] = []
        cur = list(gold)
        text_cls = None
        for cls in order:
            if len(chosen) >= n_errors:
                break
            if cls in TEXT_OPS:
                if text_cls is None:
                    text_cls = cls  # applied after rendering; at most one text-level error
                    chosen.append(cls)
                continue
            res = CALL_OPS[cls](cur, info, f, rng)
            if res is not None:
                cur, detail = res
                chosen.append(cls)
                details.append(detail)
        try:
            text = f.render(cur)
        except Exception:  # a corrupted call this format cannot express: try again
            rejected += 1
            continue
        if text_cls is not None:
            res = TEXT_OPS[text_cls](text, f, cur, rng)
            if res is None:
                chosen.remove(text_cls)
            else:
                text, detail = res
                details.append(detail)
        if not chosen:
            continue
        applied_any = True
        if _honest(text, gold, f, broken=text_cls in chosen):
            return Corruption(
                text=text,
                error_classes=tuple(chosen),
                calls=None if text_cls in chosen else cur,
                details=tuple(details),
                rejected=rejected,
            )
        rejected += 1
    if not applied_any:
        raise CorruptionError(f"none of the error classes {pool} applies to these {fmt} calls: {gold!r}")
    raise CorruptionError(f"no {fmt} corruption of classes {pool} changed anything after {max_tries} tries")


def _honest(text: str, gold: Sequence[ToolCall], f: WireFormat, *, broken: bool) -> bool:
    """The label is true: a format error really fails strict parsing; any other error parses and differs."""
    try:
        parsed = f.parse_strict(text)
    except FormatError:
        return broken
    return not broken and not same_calls(parsed, gold, f)
