"""The rule corruptor's vocabulary: error classes by group, the label a corruption carries, and its errors.

Five groups of classes (:data:`ERROR_GROUPS`): ``format`` (the text itself is broken), ``name`` (tool and parameter
names), ``content`` (parameters dropped or added, values), ``sequence`` (call and step order; not called "order",
which names a wire format and a reward component), ``left_to_model`` (narrow cases of the name and content errors that
the default tier 1 leaves to the model, two of them tied to what the request states; no default mix asks for them). The data config's ``error_types`` and the recovery benchmark's
``classes`` name groups or classes; :func:`expand_classes` reads both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from refiner.calls import ToolCall

ERROR_GROUPS: dict[str, tuple[str, ...]] = {
    "format": ("broken_json", "missing_tag", "wrong_tag", "wrong_format"),
    "name": ("tool_name_typo", "tool_name_near_miss", "param_name_typo", "param_name_synonym"),
    "content": ("missing_required_param", "extra_param", "value_type_drift", "wrong_value"),
    "sequence": ("swapped_calls", "shuffled_order", "split_step", "merge_steps"),
    # What the default tier 1 leaves to the model on purpose (docs/evaluation.md): a parameter name in another case
    # convention, a number written as text, a value wrapped in a one-item list, a parameter the spec does not declare
    # (soft findings real gold data contradicts), and two no rule can fix: a required value the request states,
    # dropped from the call, and a value the request states, altered in the call (these two need the request text).
    "left_to_model": ("param_name_case", "number_as_text", "one_item_list", "undeclared_param",
                      "query_value_dropped", "query_value_altered"),
}
ERROR_CLASSES: tuple[str, ...] = tuple(c for group in ERROR_GROUPS.values() for c in group)
TEXT_CLASSES = frozenset(ERROR_GROUPS["format"])  # applied to the rendered text, not to the calls
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
