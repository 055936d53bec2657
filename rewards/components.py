"""The reward components of the Tool-Use Refiner paper (Section 3.3), as small pure functions over call lists.

Every component is a float in ``[-2, 2]``, or ``None`` when it is not applicable to the sample (its ground-truth set
is empty, or the task is not order-sensitive). ``docs/rewards.md`` gives the formulas and every edge case.

Two variants:

- ``"paper"``: exactly the paper. Tool names: Jaccard over name *sets*. Parameter names: recall over the set of
  unique parameter names of all calls. Parameter contents: recall over the multiset of parameter values of all calls
  (values compared by canonical JSON, so ``12 != "12"``).
- ``"strict"``: precision-aware. Tool names: Jaccard over name *multisets* (a duplicated or extra call costs).
  Parameter names: F1 over the multiset of ``(tool name, parameter name)`` pairs. Parameter contents: F1 over the
  multiset of ``(parameter name, value)`` pairs. An unknown parameter or a repeated call lowers precision.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import chain
from operator import methodcaller
from typing import Any, Literal

from refiner.calls import ToolCall, canonical_json, steps_of

RewardVariant = Literal["paper", "strict"]

_chain = chain.from_iterable
_values = methodcaller("values")

VARIANTS: tuple[str, ...] = ("paper", "strict")


class lazy:
    """A property computed on first access and stored on the instance; unlike ``functools.cached_property`` on
    Python 3.11 it takes no lock, which matters at a few microseconds per reward."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = self.fn(obj)
        obj.__dict__[self.name] = value
        return value


# Types whose values are their own key: ``12``, ``"12"``, ``12.0`` and ``True`` are four different JSON values, and
# the keys of the other types (tuples) never equal a str or an int.
_OWN_KEY = frozenset((str, int))


def value_key(value: object) -> Hashable:
    """A key with the same equality as ``canonical_json(value)``, cheaper for the common scalar values.

    Strings and ints key as themselves (a str never equals an int, and their JSON text is unique per value); floats,
    bools and null as tagged tuples (``1.0 == 1 == True`` and ``0.0 == -0.0`` in Python, not in JSON, so floats key
    by their repr, which is their JSON text up to the spelling of inf and nan); other values key as
    ``("j", canonical JSON)``. A value that cannot be serialised (too deep) falls back to its repr."""
    t = type(value)
    if t in _OWN_KEY:
        return value
    if t is float:
        return ("f", repr(value))  # the JSON encoder writes finite floats as their repr; inf and nan map one to one
    if t is bool:
        return ("bool", value)
    if value is None:
        return ("null",)
    try:
        return ("j", canonical_json(value))
    except (TypeError, ValueError, RecursionError):
        return ("repr", repr(value)[:10_000])


def sequences_by_step(calls: Iterable[ToolCall]) -> bool:
    """Whether a call list uses steps (the simplified order format)."""
    return any(c.step is not None for c in calls)


class CallFeatures:
    """What the components look at in one call list. Flat lists of every call's names, parameter names and value
    keys are built in one pass up front; every other feature on first use, so a variant pays only for what it reads
    and the ground truth's features are computed once."""

    def __init__(self, calls: Sequence[ToolCall], *, by_step: bool | None = None) -> None:
        self.calls: tuple[ToolCall, ...] = tuple(calls)
        # the order sequence is per-step name sets (simplified order format) or per-call names
        self.by_step: bool = sequences_by_step(self.calls) if by_step is None else by_step
        calls = self.calls
        argss = [c.arguments for c in calls]
        self.name_list: tuple[str, ...] = tuple([c.name for c in calls])
        self.arg_counts: list[int] = list(map(len, argss))  # arguments per call
        self.key_list: list[str] = list(_chain(argss))  # every call's parameter names, in order
        # their value keys: the multiset of parameter values (paper); strings and ints, most values, are their own
        # key (checked inline, as this runs for every argument of every output scored)
        self.value_list: list[Hashable] = [
            v if type(v) in _OWN_KEY else value_key(v) for v in _chain(map(_values, argss))
        ]

    @classmethod
    def of(cls, calls: Sequence[ToolCall], *, by_step: bool | None = None) -> CallFeatures:
        """Features of ``calls``; ``by_step`` defaults to whether any call has a ``step``."""
        return cls(calls, by_step=by_step)

    @property
    def n_calls(self) -> int:
        return len(self.calls)

    @property
    def n_args(self) -> int:
        """Number of arguments over all calls: the size of every parameter multiset."""
        return len(self.value_list)

    @lazy
    def arg_keys(self) -> tuple[tuple[tuple[str, Hashable], ...], ...]:
        """Per call: ((parameter, value key), ...)."""
        pairs = list(zip(self.key_list, self.value_list))
        out, i = [], 0
        for n in self.arg_counts:
            out.append(tuple(pairs[i : i + n]))
            i += n
        return tuple(out)

    @lazy
    def names(self) -> frozenset[str]:
        return frozenset(self.name_list)

    @lazy
    def name_counts(self) -> Counter:
        return Counter(self.name_list)

    @lazy
    def call_keys(self) -> tuple[tuple, ...]:
        """Per call, a key equal exactly when ``ToolCall.key()`` is (name, canonical arguments, outputs, step), built
        from the value keys instead of serialising every call."""
        return tuple((c.name, frozenset(a), c.outputs, c.step) for c, a in zip(self.calls, self.arg_keys))

    @lazy
    def param_names(self) -> frozenset[str]:
        return frozenset(self.key_list)

    @lazy
    def param_values(self) -> Counter:
        return Counter(self.value_list)

    @lazy
    def tool_param_list(self) -> list[tuple[str, str]]:
        """(tool, parameter) of all arguments: that multiset (strict)."""
        return [(n, k) for n, a in zip(self.name_list, self.arg_keys) for k, _ in a]

    @lazy
    def tool_param_pairs(self) -> Counter:
        return Counter(self.tool_param_list)

    @lazy
    def value_pair_list(self) -> list[tuple[str, Hashable]]:
        """(parameter, value key) of all arguments: that multiset (strict)."""
        return list(zip(self.key_list, self.value_list))

    @lazy
    def param_value_pairs(self) -> Counter:
        return Counter(self.value_pair_list)

    @lazy
    def sequence(self) -> tuple[Hashable, ...]:
        return tuple(steps_of(self.calls)) if self.by_step else self.name_list


def scale(fraction: float) -> float:
    """Maps a fraction in [0, 1] to the paper's component range [-2, 2]."""
    return 4.0 * fraction - 2.0


def _multiset_size(c: Counter) -> int:
    return sum(c.values())


def _multiset_overlap(a: Counter, b: Counter) -> int:
    if len(a) > len(b):
        a, b = b, a
    return sum(min(n, b[k]) for k, n in a.items() if k in b)


def multiset_hits(items: Iterable[Hashable], gold: Counter) -> int:
    """|items ∩ gold| as multisets, with ``items`` as a plain sequence (no Counter built for the output)."""
    left = dict(gold)
    hits = 0
    for item in items:
        n = left.get(item)
        if n:
            left[item] = n - 1
            hits += 1
    return hits


def jaccard(out: frozenset | set, gold: frozenset | set) -> float:
    """|O ∩ G| / |O ∪ G|; 1.0 when both are empty (nothing expected, nothing produced)."""
    union = len(out | gold)
    return 1.0 if union == 0 else len(out & gold) / union


def multiset_jaccard(out: Counter, gold: Counter) -> float:
    """Multiset Jaccard (min counts over max counts); 1.0 when both are empty."""
    inter = _multiset_overlap(out, gold)
    union = _multiset_size(out) + _multiset_size(gold) - inter
    return 1.0 if union == 0 else inter / union


def recall(overlap: int, gold_size: int) -> float:
    return overlap / gold_size


def f1(overlap: int, out_size: int, gold_size: int) -> float:
    """Harmonic mean of precision and recall; 0.0 when nothing overlaps."""
    denom = out_size + gold_size
    return 0.0 if overlap == 0 or denom == 0 else 2.0 * overlap / denom


# ---------------------------------------------------------------------------------------------------------------
# Components. Each takes the features of the output (O) and of the ground truth (G).


def tool_name_reward(out: CallFeatures, gold: CallFeatures, variant: RewardVariant = "paper") -> float:
    """R_name = 4·J(O_n, G_n) − 2. Always applicable: with no gold calls, producing none scores +2 and producing any
    scores −2."""
    if variant == "strict":
        return scale(multiset_jaccard(out.name_counts, gold.name_counts))
    return scale(jaccard(out.names, gold.names))


def param_name_reward(
    out: CallFeatures, gold: CallFeatures, variant: RewardVariant = "paper"
) -> float | None:
    """R_pname = 4·|O_pn ∩ G_pn| / |G_pn| − 2 (paper: recall over unique names); ``None`` when the ground truth has no
    parameters."""
    if not gold.param_names:
        return None
    if variant == "strict":
        inter = multiset_hits(out.tool_param_list, gold.tool_param_pairs)
        return scale(f1(inter, out.n_args, gold.n_args))
    return scale(recall(len(out.param_names & gold.param_names), len(gold.param_names)))


def param_content_reward(
    out: CallFeatures, gold: CallFeatures, variant: RewardVariant = "paper"
) -> float | None:
    """R_pcontent = 4·|O_pc ∩ G_pc| / |G_pc| − 2 over value multisets (paper: recall); ``None`` when the ground truth
    has no parameter values."""
    if not gold.n_args:
        return None
    if variant == "strict":
        inter = multiset_hits(out.value_pair_list, gold.param_value_pairs)
        return scale(f1(inter, out.n_args, gold.n_args))
    return scale(recall(multiset_hits(out.value_list, gold.param_values), gold.n_args))


def order_reward(out: CallFeatures, gold: CallFeatures) -> float | None:
    """R_order = 4·Σ_{i ≤ min(m,n)} 1(g_i = o_i) / max(m, n) − 2 over the per-call names (or per-step name sets);
    ``None`` when the ground truth is empty. An empty output scores −2."""
    g, o = gold.sequence, out.sequence
    if not g:
        return None
    hits = sum(1 for a, b in zip(g, o) if a == b)
    return scale(hits / max(len(g), len(o)))
