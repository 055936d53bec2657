"""The canonical tool-call model shared by every part of the project.

A call has a tool ``name``, ``arguments`` (a JSON object: keys are strings, values any JSON value), and optionally
``outputs`` (the labels its results are stored under: NesTools ``API_call_N`` placeholders, NESTFUL ``$var_N``) and a
``step`` (the simplified order format groups tool names into numbered steps). A call list is ordered.

Two calls are equal when their names, outputs, steps and canonical argument JSON are equal: keys are sorted, so key
order never matters, and JSON types are kept, so ``12`` and ``"12"`` (or ``1`` and ``true``) are different values.

Call lists are compared here and nowhere else: :func:`calls_equal` (as sequences or multisets) and :func:`same_calls`
(what two lists mean in a wire format: by step groups when both carry steps, else in sequence for order-sensitive
formats and as multisets for the others).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

JSON = Any


def canonical_json(value: JSON) -> str:
    """The one canonical text of a JSON value: sorted keys, no whitespace, unicode kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


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
        return f"ToolCall({self.name!r}, {dict(self.arguments)!r}{extra})"

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
