"""The canonical tool-call model shared by every part of the project.

A call has a tool ``name``, ``arguments`` (a JSON object: keys are strings, values any JSON value), and optionally
``outputs`` (the labels its results are stored under: NesTools ``API_call_N`` placeholders, NESTFUL ``$var_N``) and a
``step`` (the simplified order format groups tool names into numbered steps). A call list is ordered.

Two calls are equal when their names, outputs, steps and canonical argument JSON are equal: keys are sorted, so key
order never matters, and JSON types are kept, so ``12`` and ``"12"`` (or ``1`` and ``true``) are different values.

Call lists are compared here and nowhere else: :func:`calls_equal` (as sequences or multisets) and :func:`same_calls`
(what two lists mean in a wire format: by step groups when both carry steps, else in sequence for order-sensitive
formats and as multisets for the others). References between the calls of a list (an argument naming an earlier
call's output) are found here too: :func:`references_in`, :func:`dependencies`, :func:`dependency_order`.
"""

from __future__ import annotations

import heapq
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

JSON = Any


def canonical_json(value: JSON) -> str:
    """The one canonical text of a JSON value: sorted keys, no whitespace, unicode kept. Total on JSON values of any
    depth (nesting beyond Python's recursion limit is written by an iterative writer, with the same text) and size:
    an integer with more digits than Python turns into text (``sys.get_int_max_str_digits()``) is written in
    hexadecimal (``0x...``, which no JSON number text starts with). Raises ``TypeError`` for a value that is not
    JSON."""
    try:
        return _dumps(value)
    except (RecursionError, ValueError):
        return _canonical_iterative(value)


_dumps = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode
_encode_str = json.JSONEncoder(ensure_ascii=False).encode


def _scalar_text(value: JSON) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _encode_str(value)
    if isinstance(value, int):
        try:
            return int.__repr__(value)
        except ValueError:  # more digits than Python writes in decimal
            return hex(value)
    if isinstance(value, float):
        return _dumps(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_TEXT = 0  # a stack entry that is text to write as it is
_VALUE = 1  # a stack entry that is a value to write


def _canonical_iterative(value: JSON) -> str:
    """:func:`canonical_json` with an explicit stack (for values nested deeper than the recursion limit)."""
    out: list[str] = []
    stack: list[tuple[int, Any]] = [(_VALUE, value)]
    while stack:
        kind, item = stack.pop()
        if kind == _TEXT:
            out.append(item)
        elif isinstance(item, Mapping):
            out.append("{")
            stack.append((_TEXT, "}"))
            keys = sorted(item)
            for n in range(len(keys) - 1, -1, -1):
                stack.append((_VALUE, item[keys[n]]))
                stack.append((_TEXT, ("," if n else "") + _scalar_text(keys[n]) + ":"))
        elif isinstance(item, (list, tuple)):
            out.append("[")
            stack.append((_TEXT, "]"))
            for n in range(len(item) - 1, -1, -1):
                stack.append((_VALUE, item[n]))
                if n:
                    stack.append((_TEXT, ","))
        else:
            out.append(_scalar_text(item))
    return "".join(out)


_LEAVES = frozenset((str, int, float, bool, type(None)))


def value_depth(value: JSON, limit: int) -> int:
    """How deeply ``value`` nests lists and objects (a scalar: 0), counted up to ``limit + 1`` (deeper values stop
    there). Iterative, level by level, and visits each node at most once."""
    level = [value]
    depth = 0
    while level:
        below: list[Any] = []
        found = False
        for v in level:
            if type(v) is dict:
                children = v.values()
            elif type(v) is list or type(v) is tuple:
                children = v
            elif type(v) in _LEAVES:
                continue
            elif isinstance(v, Mapping):
                children = v.values()
            elif isinstance(v, (list, tuple)):
                children = v
            else:
                continue
            found = True
            below.extend([c for c in children if type(c) not in _LEAVES])
        if not found:
            return depth
        depth += 1
        if depth > limit:
            return depth
        level = below
    return depth


def preview(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, built from at most ``limit`` nodes: a huge, deeply nested or
    unprintable value costs no more than a small one, and this never raises."""
    if type(value) is str and len(value) <= limit - 2 and value.isprintable() and "'" not in value:
        return "'" + value + "'"  # (the common case, as repr writes it)
    if type(value) in _LEAVES and type(value) is not str and (type(value) is not int or value.bit_length() <= 128):
        text = repr(value)
        return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."
    out: list[str] = []
    size = 0
    stack: list[tuple[int, Any]] = [(_VALUE, value)]
    while stack and size <= limit:
        kind, item = stack.pop()
        if kind == _TEXT:
            piece = item
        elif isinstance(item, Mapping):
            piece = "{"
            stack.append((_TEXT, "}"))
            pairs = list(_first(item.items(), limit))
            for n in range(len(pairs) - 1, -1, -1):
                stack.append((_VALUE, pairs[n][1]))
                stack.append((_TEXT, (", " if n else "") + _short_repr(pairs[n][0], limit) + ": "))
        elif isinstance(item, (list, tuple)):
            piece = "[" if isinstance(item, list) else "("
            stack.append((_TEXT, "]" if isinstance(item, list) else ")"))
            items = list(_first(item, limit))
            for n in range(len(items) - 1, -1, -1):
                stack.append((_VALUE, items[n]))
                if n:
                    stack.append((_TEXT, ", "))
        else:
            piece = _short_repr(item, limit)
        out.append(piece)
        size += len(piece)
    text = "".join(out)
    if stack or len(text) > limit:
        return text[: max(limit - 3, 0)] + "..."
    return text


def _short_repr(item: Any, limit: int) -> str:
    if isinstance(item, str):
        return repr(item[: limit + 1])
    if isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 256:
        return f"<integer of {item.bit_length()} bits>"
    try:
        return repr(item)[: limit + 1]
    except Exception:  # noqa: BLE001 - a preview never fails
        return f"<{type(item).__name__}>"


def _first(items: Any, n: int) -> Any:
    for i, x in enumerate(items):
        if i >= n:
            return
        yield x


@dataclass(frozen=True, eq=False)
class ToolCall:
    name: str
    arguments: Mapping[str, JSON] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    step: int | None = None

    def __post_init__(self) -> None:
        # exact type checks first: parsers build one call per call of every output scored, and an ABC isinstance
        # check costs as much as the rest of the construction
        if type(self.name) is not str and not isinstance(self.name, str):
            raise TypeError(f"tool name must be a string, got {type(self.name).__name__}")
        if type(self.arguments) is not dict and not isinstance(self.arguments, Mapping):
            raise TypeError(f"arguments of {self.name!r} must be an object, got {type(self.arguments).__name__}")
        if type(self.outputs) is not tuple:
            object.__setattr__(self, "outputs", tuple(self.outputs))

    @classmethod
    def trusted(
        cls, name: str, arguments: dict[str, JSON], outputs: tuple[str, ...] = (), step: int | None = None
    ) -> ToolCall:
        """A call built without the constructor's checks, for parsers that have just checked that ``name`` is a
        ``str``, ``arguments`` a ``dict`` and ``outputs`` a ``tuple``: a third of the cost of ``ToolCall(...)``,
        which every reward pays once per call of every output it scores."""
        self = _new(cls)
        d = self.__dict__
        d["name"], d["arguments"], d["outputs"], d["step"] = name, arguments, outputs, step
        return self

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
        extra = ""
        if self.outputs:
            extra += f", outputs={self.outputs!r}"
        if self.step is not None:
            extra += f", step={self.step}"
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
        return cls(
            name=d["name"],
            arguments=dict(d.get("arguments") or {}),
            outputs=tuple(d.get("outputs") or ()),
            step=d.get("step"),
        )


_new = object.__new__


def calls_equal(a: Iterable[ToolCall], b: Iterable[ToolCall], *, ordered: bool) -> bool:
    """Same calls; in the same order when ``ordered``, else as multisets."""
    a, b = list(a), list(b)
    if ordered:
        return a == b
    return Counter(c.key() for c in a) == Counter(c.key() for c in b)


class OrderRule(Protocol):
    """What :func:`same_calls` reads of a wire format (a ``refiner.formats.WireFormat``)."""

    order_sensitive: bool


def has_steps(calls: Sequence[ToolCall]) -> bool:
    """Whether every call of a non-empty list carries a step number (the simplified order format)."""
    return bool(calls) and all(c.step is not None for c in calls)


def same_calls(a: Sequence[ToolCall], b: Sequence[ToolCall], fmt: OrderRule) -> bool:
    """Whether two call lists mean the same in the wire format ``fmt`` (a registered ``WireFormat``; only its
    ``order_sensitive`` flag is read): when both carry steps, the same tool names per step and the same calls as a
    multiset (step numbers aside); else the same calls in sequence when ``fmt`` is order-sensitive, as multisets
    when it is not."""
    if has_steps(b) and has_steps(a):
        return steps_of(a) == steps_of(b) and calls_equal(
            [ToolCall(c.name, dict(c.arguments), c.outputs) for c in a],
            [ToolCall(c.name, dict(c.arguments), c.outputs) for c in b],
            ordered=False,
        )
    return calls_equal(a, b, ordered=fmt.order_sensitive)


def steps_of(calls: Iterable[ToolCall]) -> list[frozenset[str]]:
    """The tool-name sets per step, in step order (for the simplified order format)."""
    by_step: dict[int, set[str]] = {}
    for c in calls:
        by_step.setdefault(c.step if c.step is not None else 0, set()).add(c.name)
    return [frozenset(by_step[s]) for s in sorted(by_step)]


# ----------------------------------------------------------------------------------------------------------------
# References between calls: a call's arguments name the outputs of earlier calls (NesTools ``API_call_N``, NESTFUL
# ``$var$`` / ``$var.field$``)

MAX_REFERENCE_VALUES = 4096  # values searched for references per call list (a 200 KB text can hold 100,000)
MAX_REFERENCE_DEPTH = 32
_NESTOOLS_REF = re.compile(r"\bAPI_call_\d+\b")
_NESTFUL_REF = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)(?:\.[^$]*)?\$")


class Count:
    """A countdown of values still to inspect, shared by the checks or repairs of one call list."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0


def _refs_in_text(text: str) -> list[str]:
    if "API_call_" not in text and "$" not in text:
        return []
    return [*_NESTOOLS_REF.findall(text), *(m.group(1) for m in _NESTFUL_REF.finditer(text))]


def references_in(value: Any, depth: int = 0, *, count: Count | None = None) -> list[str]:
    """Output labels referenced anywhere inside a JSON value, in order; iterative, to a depth of
    :data:`MAX_REFERENCE_DEPTH` and at most :data:`MAX_REFERENCE_VALUES` values (or what ``count`` has left)."""
    if type(value) is str:  # the common case, without the walk
        return [] if count is not None and not count.take() else _refs_in_text(value)
    count = count if count is not None else Count(MAX_REFERENCE_VALUES)
    refs: list[str] = []
    stack = [(value, depth)]
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
    return isinstance(value, str) and bool(_NESTOOLS_REF.fullmatch(value) or _NESTFUL_REF.fullmatch(value))


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
    """For each call, the indices of the calls whose outputs it references (self-references excluded). At most
    :data:`MAX_REFERENCE_VALUES` values are searched over the whole list."""
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
    """Indices of ``calls`` in an order where every call follows the calls it references: Kahn's algorithm taking
    the lowest original index first (stable for independent calls). ``None`` when the references form a cycle."""
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
