"""Scoring one output against a ground truth: the components, the normalised total, the regression penalty and acc.

Layers, each reusable on its own:

- :func:`parse_output` — ``(format_ok, calls)``: strict parse when it succeeds, lenient calls otherwise.
- :func:`breakdown` — a :class:`Breakdown` (every component, the raw total and its range, acc) for text vs gold.
- :func:`score_calls` — the full result dict for output text vs a list of gold calls (evaluation, data checks).
- :func:`compute_score` — verl's entry point (``ground_truth`` JSON, ``extra_info["upstream"]``).

None of these raises on any output text; a bad ground truth raises :class:`~rewards.ground_truth.GroundTruthError`.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import reasoning
from rewards.components import (
    VARIANTS,
    CallFeatures,
    RewardVariant,
    order_reward,
    param_content_reward,
    param_name_reward,
    tool_name_reward,
)
from rewards.ground_truth import Gold, GroundTruthError, parse_ground_truth

log = logging.getLogger(__name__)

# A text that fails the strict parse is parsed leniently up to this many characters after its reasoning: a real
# answer is a few KB at most, and best-effort JSON repair on a long hostile text costs milliseconds per KB.
LENIENT_ANSWER_CHARS = 8192

# An answer (the text after the reasoning) longer than this is a format error and is only read leniently (its first
# LENIENT_ANSWER_CHARS): a refiner answer is a few KB, and 4,096 tokens of answer text measure 11-15 KiB in every
# format, while reading a 100 KB answer of thousands of tiny calls costs tens of milliseconds in any format.
STRICT_ANSWER_CHARS = 24_576

# Totals closer than this are equal for the regression penalty (sums of fractions are not exact in floating point).
TOTAL_EPS = 1e-9

# The fixed keys of every result, in order (verl takes the key list from the first sample of a batch).
RESULT_KEYS: tuple[str, ...] = (
    "score",
    "acc",
    "format",
    "tool_name",
    "param_name",
    "param_content",
    "order",
    "param_name_applicable",
    "param_content_applicable",
    "order_applicable",
    "total",
    "total_min",
    "total_max",
    "normalized",
    "has_upstream",
    "upstream_total",
    "penalized",
    "strict_variant",
)


class Breakdown:
    """Every component of one output against one ground truth (``None``: not applicable), and the totals derived
    from them: ``content`` (the applicable content components), ``k`` (their number), ``total``, its range
    ``[total_min, total_max]`` = [−2k, 1 + 2k] and ``normalized`` (the total mapped from that range to [0, 1])."""

    __slots__ = (
        "format",
        "tool_name",
        "param_name",
        "param_content",
        "order",
        "acc",
        "content",
        "k",
        "total",
        "total_min",
        "total_max",
        "normalized",
    )

    def __init__(
        self,
        format: float,  # noqa: A002 - the component's name
        tool_name: float,
        param_name: float | None,
        param_content: float | None,
        order: float | None,
        acc: float,
    ) -> None:
        self.format, self.tool_name, self.param_name = format, tool_name, param_name
        self.param_content, self.order, self.acc = param_content, order, acc
        self.content = tuple(v for v in (tool_name, param_name, param_content, order) if v is not None)
        self.k = len(self.content)
        self.total = format + sum(self.content)
        self.total_min = -2.0 * self.k
        self.total_max = 1.0 + 2.0 * self.k
        self.normalized = min(1.0, max(0.0, (self.total - self.total_min) / (self.total_max - self.total_min)))

    def __repr__(self) -> str:
        return (
            f"Breakdown(format={self.format}, tool_name={self.tool_name}, param_name={self.param_name}, "
            f"param_content={self.param_content}, order={self.order}, acc={self.acc})"
        )


def parse_output(text: str, fmt: formats.WireFormat) -> tuple[bool, list[ToolCall]]:
    """``(True, strict calls)`` when ``text`` is strictly valid in ``fmt``; else ``(False, lenient calls)`` from the
    reasoning plus the first :data:`LENIENT_ANSWER_CHARS` characters of the answer (at most one strict parse).
    Answers longer than :data:`STRICT_ANSWER_CHARS` are not parsed strictly (format error). Never raises (strict
    parsers raise only :class:`FormatError`; a parser bug, which lenient parsing reports as an ``internal`` problem,
    is logged and counts as unparseable)."""
    text = reasoning.read(text)  # its reasoning split made once, for every reader below
    start = formats.reasoning_offset(text)
    if len(text) - start > STRICT_ANSWER_CHARS:
        cut = text[: start + LENIENT_ANSWER_CHARS]
        return False, fmt.parse_lenient(cut, limit=LENIENT_ANSWER_CHARS).calls
    if len(text) > formats.MAX_LENIENT_CHARS:  # parse_lenient would not try these strictly
        try:
            return True, fmt.parse_strict(text)
        except formats.FormatError:
            pass
    result = fmt.parse_lenient(text, limit=LENIENT_ANSWER_CHARS)
    if result.ok:
        return True, result.calls
    for problem in result.problems:
        if problem.code == "internal":  # a parser bug: never raised, but worth a log line
            log.warning("%s parse failed on an output (%s); scored as a format error", fmt.name, problem)
    return False, result.calls


def is_exact(out: CallFeatures | Sequence[ToolCall], gold: Gold) -> bool:
    """The output's calls equal the gold calls: same steps for step lists (order format), else the same calls
    (``refiner.calls.calls_equal`` semantics) as a sequence (order-sensitive) or a multiset."""
    if not isinstance(out, CallFeatures):
        out = CallFeatures.of(out, by_step=gold.by_step)
    if out.n_calls != len(gold.calls):
        return False
    if gold.by_step:
        return out.sequence == gold.features.sequence  # the same steps (the order reward reads these too)
    if _same_in_order(out, gold):
        return True
    if gold.order_sensitive or any(c.name not in gold.features.names for c in out.calls):
        return False  # cheap rejections before building call keys
    return Counter(out.call_keys) == gold.call_key_counts


def _same_lists(out: CallFeatures, g: CallFeatures) -> bool:
    """The same tool names and the same arguments (names and values), in the same order."""
    return (
        out.name_list == g.name_list
        and out.arg_counts == g.arg_counts
        and out.key_list == g.key_list
        and out.value_list == g.value_list
    )


def _same_in_order(out: CallFeatures, gold: Gold) -> bool:
    """The i-th output call equals the i-th gold call for every i (argument order aside): the whole answer for
    order-sensitive tasks, and the common case of the others, checked without building call keys."""
    g = gold.features
    if out.name_list != g.name_list or out.arg_counts != g.arg_counts:
        return False
    for oc, gc in zip(out.calls, gold.calls):
        if oc.outputs != gc.outputs or oc.step != gc.step:
            return False
    if out.key_list == g.key_list and out.value_list == g.value_list:
        return True  # the same arguments in the same order (the usual case: no per-call sets built)
    return all(oa == ga or frozenset(oa) == frozenset(ga) for oa, ga in zip(out.arg_keys, g.arg_keys))


def breakdown_calls(
    format_ok: bool, calls: Sequence[ToolCall], gold: Gold, variant: RewardVariant = "paper"
) -> Breakdown:
    """Components for already-parsed ``calls`` (``format_ok``: whether their text parsed strictly)."""
    out = CallFeatures.of(calls, by_step=gold.by_step)
    g = gold.features
    if _same_lists(out, g):  # the gold names and arguments (a right answer, the common case late in training)
        tool_name, param_name, param_content = gold.own_components(variant)
    else:
        tool_name = tool_name_reward(out, g, variant)
        param_name = param_name_reward(out, g, variant)
        param_content = param_content_reward(out, g, variant)
    return Breakdown(
        format=1.0 if format_ok else 0.0,
        tool_name=tool_name,
        param_name=param_name,
        param_content=param_content,
        order=order_reward(out, g) if gold.order_sensitive else None,
        acc=1.0 if format_ok and is_exact(out, gold) else 0.0,
    )


def breakdown(text: str, gold: Gold, variant: RewardVariant = "paper") -> Breakdown:
    """Components of output ``text`` against ``gold``. Never raises on any text."""
    format_ok, calls = parse_output(text, gold.fmt)
    try:
        return breakdown_calls(format_ok, calls, gold, variant)
    except Exception as e:  # noqa: BLE001 - scoring must never stop training; logged
        log.warning("reward scoring failed on an output (%r); scored as no calls", e)
        return breakdown_calls(False, [], gold, variant)


@lru_cache(maxsize=16384)
def _upstream_breakdown(gold: Gold, upstream: str, variant: str) -> Breakdown:
    """The upstream output's breakdown; cached because every rollout of a prompt shares it."""
    return breakdown(upstream, gold, variant)  # type: ignore[arg-type]


def check_variant(variant: Any) -> RewardVariant:
    if variant not in VARIANTS:
        raise ValueError(f"reward variant must be one of {', '.join(VARIANTS)}; got {variant!r}")
    return variant


def score_gold(
    text: str,
    gold: Gold,
    *,
    upstream: str | None = None,
    variant: RewardVariant = "paper",
    regression_penalty: bool = True,
) -> dict[str, float]:
    """The full result for ``text`` against a parsed :class:`Gold`: every key of :data:`RESULT_KEYS`, all floats."""
    variant = check_variant(variant)
    text = _as_text(text)
    b = breakdown(text, gold, variant)
    has_up = upstream is not None
    up = _as_text(upstream) if has_up else ""
    up_total = (b.total if up == text else _upstream_breakdown(gold, up, variant).total) if has_up else 0.0
    penalized = bool(has_up and regression_penalty and b.total < up_total - TOTAL_EPS)
    normalized = b.normalized
    return {
        "score": 0.0 if penalized else normalized,
        "acc": b.acc,
        "format": b.format,
        "tool_name": b.tool_name,
        "param_name": b.param_name if b.param_name is not None else 0.0,
        "param_content": b.param_content if b.param_content is not None else 0.0,
        "order": b.order if b.order is not None else 0.0,
        "param_name_applicable": float(b.param_name is not None),
        "param_content_applicable": float(b.param_content is not None),
        "order_applicable": float(b.order is not None),
        "total": b.total,
        "total_min": b.total_min,
        "total_max": b.total_max,
        "normalized": normalized,
        "has_upstream": float(has_up),
        "upstream_total": up_total,
        "penalized": float(penalized),
        "strict_variant": float(variant == "strict"),
    }


def score_calls(
    output_text: str,
    gold_calls: Sequence[ToolCall],
    fmt: str | formats.WireFormat,
    *,
    order_sensitive: bool | None = None,
    upstream: str | None = None,
    variant: RewardVariant = "paper",
    regression_penalty: bool = True,
) -> dict[str, float]:
    """The result for ``output_text`` against ``gold_calls`` in ``fmt`` (order sensitivity defaults to the format's).
    For evaluation and data checks; the same numbers training sees."""
    return score_gold(
        output_text,
        Gold.from_calls(list(gold_calls), fmt, order_sensitive),
        upstream=upstream,
        variant=variant,
        regression_penalty=regression_penalty,
    )


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: str | Mapping[str, Any],
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl's reward entry point. ``ground_truth``: ``{"format", "answer", "order_sensitive"}`` (JSON string or
    mapping); ``extra_info["upstream"]``: the upstream text (absent: no regression penalty).

    Options, from ``reward.custom_reward_function.reward_kwargs`` (win) or ``extra_info``: ``variant`` /
    ``reward_variant`` (``"paper"`` or ``"strict"``), ``regression_penalty`` (bool, default true). Other keyword
    arguments verl passes are ignored."""
    gold = parse_ground_truth(ground_truth)
    info: Mapping[str, Any] = extra_info if isinstance(extra_info, Mapping) else {}
    variant = kwargs.get("variant", info.get("reward_variant", "paper"))
    penalty = kwargs.get("regression_penalty", info.get("regression_penalty", True))
    upstream = info.get("upstream")
    return score_gold(
        solution_str,
        gold,
        upstream=upstream if isinstance(upstream, str) else None,
        variant=check_variant(variant),
        regression_penalty=bool(penalty),
    )


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return "" if value is None else str(value)


__all__ = [
    "RESULT_KEYS",
    "Breakdown",
    "GroundTruthError",
    "breakdown",
    "breakdown_calls",
    "compute_score",
    "is_exact",
    "parse_output",
    "score_calls",
    "score_gold",
]
