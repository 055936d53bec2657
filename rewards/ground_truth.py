"""The reward ground truth: its one writer and its one reader.

``reward_model.ground_truth`` is a JSON string (a dict is accepted too)::

    {"format": "<wire format name>", "answer": "<the correct text in that format>", "order_sensitive": true|false}

- Writer: :func:`make_ground_truth` (the data builder and the LLM corruptor write rows with it).
- Reader: :func:`parse_ground_truth` (the reward, the builder's row checks and the pre-launch parquet checks of
  ``tool-refiner train`` read rows with it). It returns a :class:`Gold`; ``Gold.fields()`` gives the three fields back.

``order_sensitive`` is optional and defaults to the format's ``order_sensitive``. The answer must parse strictly in
its format. Any violation raises :class:`GroundTruthError` naming the field.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from refiner import formats
from refiner.calls import ToolCall
from rewards.components import (
    CallFeatures,
    lazy,
    param_content_reward,
    param_name_reward,
    sequences_by_step,
    tool_name_reward,
)


class GroundTruthError(ValueError):
    """A ground truth that does not follow the schema; the message names the field."""


@dataclass(frozen=True, eq=False)
class Gold:
    """A validated ground truth: its format, its calls, whether order counts, and its precomputed features.
    Compared and hashed by identity (it is a cache key)."""

    fmt: formats.WireFormat
    calls: tuple[ToolCall, ...]
    order_sensitive: bool
    by_step: bool
    features: CallFeatures

    @lazy
    def answer(self) -> str:
        """The answer text: as the ground truth wrote it, or the gold calls rendered in the format."""
        return self.fmt.render(list(self.calls))

    def fields(self) -> dict[str, Any]:
        """The ground truth's fields, ``{"format", "answer", "order_sensitive"}`` (``order_sensitive`` resolved)."""
        return {"format": self.fmt.name, "answer": self.answer, "order_sensitive": self.order_sensitive}

    @lazy
    def call_key_counts(self) -> Counter:
        """Multiset of the gold calls' identity keys (for order-free exact match)."""
        return Counter(self.features.call_keys)

    @lazy
    def _own_components(self) -> dict[str, tuple[float, float | None, float | None]]:
        return {}

    def own_components(self, variant: str) -> tuple[float, float | None, float | None]:
        """``(tool_name, param_name, param_content)`` of the gold calls scored against themselves, per variant: what
        any output with the same names and arguments in the same order scores, as the components read nothing else."""
        cache = self._own_components
        got = cache.get(variant)
        if got is None:
            g = self.features
            got = cache[variant] = (
                tool_name_reward(g, g, variant),  # type: ignore[arg-type]
                param_name_reward(g, g, variant),  # type: ignore[arg-type]
                param_content_reward(g, g, variant),  # type: ignore[arg-type]
            )
        return got

    @classmethod
    def from_calls(
        cls, calls: list[ToolCall] | tuple[ToolCall, ...], fmt: str | formats.WireFormat, order_sensitive: bool | None
    ) -> Gold:
        wf = resolve_format(fmt)
        calls = tuple(calls)
        by_step = sequences_by_step(calls)
        return cls(
            fmt=wf,
            calls=calls,
            order_sensitive=wf.order_sensitive if order_sensitive is None else bool(order_sensitive),
            by_step=by_step,
            features=CallFeatures.of(calls, by_step=by_step),
        )


def resolve_format(fmt: str | formats.WireFormat) -> formats.WireFormat:
    if isinstance(fmt, formats.WireFormat):
        return fmt
    try:
        return formats.get(fmt)
    except KeyError as e:
        raise GroundTruthError(f"ground_truth field 'format': {e.args[0]}") from None


def parse_ground_truth(ground_truth: str | Mapping[str, Any]) -> Gold:
    """Validates and parses a ground truth (JSON string or mapping). Cached for strings."""
    if isinstance(ground_truth, str):
        return _parse_cached(ground_truth)
    if isinstance(ground_truth, Mapping):
        return _gold_from_fields(
            ground_truth.get("format"),
            ground_truth.get("answer"),
            ground_truth.get("order_sensitive"),
            set(ground_truth),
        )
    raise GroundTruthError(f"ground_truth must be a JSON object string or a mapping, got {type(ground_truth).__name__}")


@lru_cache(maxsize=8192)
def _parse_cached(text: str) -> Gold:
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise GroundTruthError(f"ground_truth is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise GroundTruthError(f"ground_truth must be a JSON object, got {type(obj).__name__}")
    return _gold_from_fields(obj.get("format"), obj.get("answer"), obj.get("order_sensitive"), set(obj))


@lru_cache(maxsize=8192)
def _gold_cached(fmt_name: str, answer: str, order_sensitive: bool | None) -> Gold:
    wf = resolve_format(fmt_name)
    try:
        calls = wf.parse_strict(answer)
    except formats.FormatError as e:
        raise GroundTruthError(f"ground_truth field 'answer' is not valid {fmt_name}: {e}") from None
    gold = Gold.from_calls(calls, wf, order_sensitive)
    gold.__dict__["answer"] = answer  # the text as written (``lazy`` reads the instance dict first)
    return gold


def _gold_from_fields(fmt_name: Any, answer: Any, order_sensitive: Any, keys: set) -> Gold:
    if "format" not in keys:
        raise GroundTruthError("ground_truth field 'format' is missing")
    if not isinstance(fmt_name, str):
        raise GroundTruthError(f"ground_truth field 'format' must be a string, got {type(fmt_name).__name__}")
    if "answer" not in keys:
        raise GroundTruthError("ground_truth field 'answer' is missing")
    if not isinstance(answer, str):
        raise GroundTruthError(f"ground_truth field 'answer' must be a string, got {type(answer).__name__}")
    if order_sensitive is not None and not isinstance(order_sensitive, bool):
        raise GroundTruthError(
            f"ground_truth field 'order_sensitive' must be true/false, got {type(order_sensitive).__name__}"
        )
    return _gold_cached(fmt_name, answer, order_sensitive)


def make_ground_truth(
    fmt: str | formats.WireFormat, calls: list[ToolCall] | tuple[ToolCall, ...], order_sensitive: bool | None = None
) -> str:
    """The ground-truth JSON string for ``calls`` rendered in ``fmt``: the only writer of ``reward_model.ground_truth``
    (``order_sensitive`` defaults to the format's)."""
    wf = resolve_format(fmt)
    return json.dumps(
        {
            "format": wf.name,
            "answer": wf.render(list(calls)),
            "order_sensitive": wf.order_sensitive if order_sensitive is None else bool(order_sensitive),
        },
        ensure_ascii=False,
    )
