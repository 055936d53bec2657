"""The canonical tool-call model: a call, how two call lists compare, and the references between calls.

A call has a tool ``name``, ``arguments`` (a JSON object), optionally ``outputs`` (the labels its results are stored
under: NesTools ``API_call_N``, NESTFUL ``$var_N``) and a ``step`` (the simplified order format's step number). Two
calls are equal when their names, outputs, steps and canonical argument JSON are equal: key order never matters,
JSON types do (``12`` is not ``"12"``).
"""

from __future__ import annotations

import heapq
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

JSON = Any


def canonical_json(value: JSON) -> str:
    """The one canonical text of a JSON value: sorted keys, no whitespace, unicode kept. Total on any depth and size
    (an integer too long for decimal text is written as ``0x...``); raises ``TypeError`` for a value that is not
    JSON."""
    try:
        return _dumps(value)
    except (RecursionError, ValueError):
        return "".join(_pieces(value, _scalar_text, ",", ":", sort=True))


_dumps = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode


def _scalar_text(value: JSON) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return int.__repr__(value)
        except ValueError:  # more digits than Python writes in decimal
            return hex(value)
    return _dumps(value)


_TEXT = 0  # a stack entry that is text to write as it is
_VALUE = 1  # a stack entry that is a value to write


def _pieces(value: Any, scalar: Callable[[Any], str], comma: str, colon: str, *, sort: bool = False,
            width: int | None = None) -> Iterator[str]:
    """The text of a nested value, piece by piece, with an explicit stack (any depth): ``sort``: keys in order;
    ``width``: at most that many items or keys of each list or object; tuples are written as lists when ``sort``."""
    stack: list[tuple[int, Any]] = [(_VALUE, value)]
    while stack:
        kind, item = stack.pop()
        if kind == _TEXT:
            yield item
        elif isinstance(item, Mapping):
            yield "{"
            stack.append((_TEXT, "}"))
            pairs = [(k, item[k]) for k in sorted(item)] if sort else list(islice(item.items(), width))
            for n in range(len(pairs) - 1, -1, -1):
                stack.append((_VALUE, pairs[n][1]))
                stack.append((_TEXT, (comma if n else "") + scalar(pairs[n][0]) + colon))
        elif isinstance(item, (list, tuple)):
            brackets = "[]" if sort or isinstance(item, list) else "()"
            yield brackets[0]
            stack.append((_TEXT, brackets[1]))
            items = list(islice(item, width))
            for n in range(len(items) - 1, -1, -1):
                stack.append((_VALUE, items[n]))
                if n:
                    stack.append((_TEXT, comma))
        else:
            yield scalar(item)


_LEAVES = frozenset((str, int, float, bool, type(None)))


def value_depth(value: JSON, limit: int) -> int:
    """How deeply ``value`` nests lists and objects (a scalar: 0), counted up to ``limit + 1``; level by level,
    each node visited at most once."""
    level = [value]
    depth = 0
    while level:
        children: list[Iterable[Any]] = []  # (the containers' children, filtered once per level)
        for v in level:
            if type(v) is dict:
                children.append(v.values())
            elif type(v) is list or type(v) is tuple:
                children.append(v)
            elif type(v) in _LEAVES:
                continue
            elif isinstance(v, Mapping):
                children.append(v.values())
            elif isinstance(v, (list, tuple)):
                children.append(v)
        if not children:
            return depth
        depth += 1
        if depth > limit:
            return depth
        level = [c for c in chain.from_iterable(children) if type(c) not in _LEAVES]
    return depth


def preview(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, built from at most ``limit`` nodes: a huge, deep or unprintable
    value costs no more than a small one, and this never raises."""
    if type(value) is str and len(value) <= limit - 2 and value.isprintable() and "'" not in value:
        return "'" + value + "'"  # (the common case, as repr writes it)
    if type(value) in _LEAVES and type(value) is not str and (type(value) is not int or value.bit_length() <= 128):
        text = repr(value)
    else:
        out: list[str] = []
        size = 0
        for piece in _pieces(value, lambda item: _short_repr(item, limit), ", ", ": ", width=limit):
            out.append(piece)
            size += len(piece)
            if size > limit:
                break
        text = "".join(out)
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def _short_repr(item: Any, limit: int) -> str:
    if isinstance(item, str):
        return repr(item[: limit + 1])
    if isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 256:
        return f"<integer of {item.bit_length()} bits>"
    try:
        return repr(item)[: limit + 1]
    except Exception:  # noqa: BLE001 - a preview never fails
        return f"<{type(item).__name__}>"


_NONE: Any = object()  # (no arguments given: a call's own empty dict)


@dataclass(init=False, eq=False, slots=True)
class ToolCall:
    """One tool call: a value (nothing assigns to its fields once it is built; compare and hash it by :meth:`key`)."""

    name: str
    arguments: Mapping[str, JSON]
    outputs: tuple[str, ...]
    step: int | None

    def __init__(self, name: str, arguments: Mapping[str, JSON] = _NONE, outputs: Iterable[str] = (),
                 step: int | None = None) -> None:
        # (exact type checks first: an ABC isinstance check costs as much as the rest of the construction)
        if type(name) is not str and not isinstance(name, str):
            raise TypeError(f"tool name must be a string, got {type(name).__name__}")
        if arguments is _NONE:
            arguments = {}
        elif type(arguments) is not dict and not isinstance(arguments, Mapping):
            raise TypeError(f"arguments of {name!r} must be an object, got {type(arguments).__name__}")
        self.name = name
        self.arguments = arguments
        self.outputs = outputs if type(outputs) is tuple else tuple(outputs)
        self.step = step

    def key(self) -> tuple[str, str, tuple[str, ...], int | None]:
        """Identity used for equality, hashing and multiset comparison."""
        return (self.name, canonical_json(dict(self.arguments)), self.outputs, self.step)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCall):
            return NotImplemented
        return self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        extra = (f", outputs={self.outputs!r}" if self.outputs else "") + (
            f", step={self.step}" if self.step is not None else "")
        try:
            args = repr(dict(self.arguments))
        except (RecursionError, ValueError):  # nested beyond the recursion limit, or a huge integer
            args = preview(dict(self.arguments), 200)
        return f"ToolCall({self.name!r}, {args}{extra})"

    def to_dict(self) -> dict[str, JSON]:
        d: dict[str, JSON] = {"name": self.name, "arguments": dict(self.arguments)}
        if self.outputs:
            d["outputs"] = list(self.outputs)
        if self.step is not None:
            d["step"] = self.step
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, JSON]) -> ToolCall:
        return cls(d["name"], dict(d.get("arguments") or {}), tuple(d.get("outputs") or ()), d.get("step"))




def calls_equal(a: Iterable[ToolCall], b: Iterable[ToolCall], *, ordered: bool) -> bool:
    """Same calls; in the same order when ``ordered``, else as multisets."""
    if ordered:
        return list(a) == list(b)
    return Counter(c.key() for c in a) == Counter(c.key() for c in b)


def has_steps(calls: Sequence[ToolCall]) -> bool:
    """Whether every call of a non-empty list carries a step number (the simplified order format)."""
    return bool(calls) and all(c.step is not None for c in calls)


def same_calls(a: Sequence[ToolCall], b: Sequence[ToolCall], fmt: Any) -> bool:
    """Whether two call lists mean the same in the wire format ``fmt`` (only its ``order_sensitive`` flag is read):
    when both carry steps, the same tool names per step and the same calls as a multiset; else the same calls, in
    sequence when ``fmt`` is order-sensitive."""
    if has_steps(b) and has_steps(a):
        return steps_of(a) == steps_of(b) and Counter(c.key()[:3] for c in a) == Counter(c.key()[:3] for c in b)
    return calls_equal(a, b, ordered=fmt.order_sensitive)


def steps_of(calls: Iterable[ToolCall]) -> list[frozenset[str]]:
    """The tool-name sets per step, in step order (for the simplified order format)."""
    by_step: dict[int, set[str]] = {}
    for c in calls:
        by_step.setdefault(c.step if c.step is not None else 0, set()).add(c.name)
    return [frozenset(by_step[s]) for s in sorted(by_step)]


# ----------------------------------------------------------------------------------------------------------------
# References between calls: an argument names an earlier call's output (NesTools ``API_call_N``, NESTFUL ``$var$``)

MAX_REFERENCE_VALUES = 4096  # values searched for references per call list (a 200 KB text can hold 100,000)
MAX_REFERENCE_DEPTH = 32
_NESTOOLS_REF = re.compile(r"\bAPI_call_\d+\b")
_NESTFUL_REF = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)(?:\.[^$]*)?\$")


class Count:
    """A countdown of work still allowed, shared by the checks or repairs of one call list."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0

    def spend(self, n: int) -> bool:
        """Takes ``n`` when that many are left; False (taking nothing) otherwise."""
        if self.left < n:
            return False
        self.left -= n
        return True


def _refs_in_text(text: str) -> list[str]:
    if "API_call_" not in text and "$" not in text:
        return []
    return [*_NESTOOLS_REF.findall(text), *(m.group(1) for m in _NESTFUL_REF.finditer(text))]


def references_in(value: Any, *, count: Count | None = None) -> list[str]:
    """Output labels referenced anywhere inside a JSON value, in order, to a depth of :data:`MAX_REFERENCE_DEPTH`
    and at most :data:`MAX_REFERENCE_VALUES` values (or what ``count`` has left)."""
    if type(value) is str:  # the common case, without the walk
        return [] if count is not None and not count.take() else _refs_in_text(value)
    count = count if count is not None else Count(MAX_REFERENCE_VALUES)
    refs: list[str] = []
    stack = [(value, 0)]
    while stack and count.take():
        v, d = stack.pop()
        if isinstance(v, str):
            refs.extend(_refs_in_text(v))
        elif d <= MAX_REFERENCE_DEPTH and isinstance(v, Mapping):
            stack.extend((c, d + 1) for c in reversed(list(v.values())))
        elif d <= MAX_REFERENCE_DEPTH and isinstance(v, list):
            stack.extend((c, d + 1) for c in reversed(v))
    return refs


def is_reference(value: Any) -> bool:
    """A whole string that is one reference (its type is the referenced output's)."""
    return isinstance(value, str) and value[:1] in "$A" and bool(
        _NESTOOLS_REF.fullmatch(value) or _NESTFUL_REF.fullmatch(value))


def output_label(label: str) -> str:
    """The bare name of an output label: ``$var_1`` and ``var_1`` both name ``var_1``."""
    return label.removeprefix("$")


def producers(calls: Sequence[ToolCall]) -> dict[str, int]:
    """Output label → index of the first call that produces it."""
    out: dict[str, int] = {}
    for i, c in enumerate(calls):
        for label in c.outputs:
            out.setdefault(output_label(label), i)
    return out


def dependencies(calls: Sequence[ToolCall]) -> list[set[int]]:
    """For each call, the indices of the other calls whose outputs it references (at most
    :data:`MAX_REFERENCE_VALUES` values searched over the list)."""
    made_by = producers(calls)
    if not made_by:
        return [set() for _ in calls]
    count = Count(MAX_REFERENCE_VALUES)
    deps: list[set[int]] = []
    for i, c in enumerate(calls):
        refs = references_in(dict(c.arguments), count=count)
        deps.append({made_by[r] for r in refs if r in made_by and made_by[r] != i})
    return deps


def dependency_order(calls: Sequence[ToolCall]) -> list[int] | None:
    """Indices of ``calls`` in an order where every call follows the calls it references (Kahn's algorithm, lowest
    index first: stable for independent calls); ``None`` when the references form a cycle."""
    if not any(c.outputs for c in calls):  # (no call produces an output: none can reference another)
        return list(range(len(calls)))
    deps = dependencies(calls)
    users: list[list[int]] = [[] for _ in calls]
    pending = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    ready = [i for i, n in enumerate(pending) if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, u)
    return order if len(order) == len(calls) else None
