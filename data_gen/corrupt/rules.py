"""Seeded, model-free corruption of gold tool calls into a plausible upstream mistake: the entry point.

``corrupt(calls, fmt, tools, rng, classes=None) -> Corruption(text, error_classes, calls)`` renders the gold calls in
wire format ``fmt`` with one (or ``n_errors``) seeded errors drawn from ``classes`` (error-class or group names; all
classes by default) and labels the result. Classes fall in four groups (:mod:`data_gen.corrupt.labels`):

- ``format``: the text itself is broken (``broken_json``, ``missing_tag``, ``wrong_tag``, ``wrong_format``); the
  result never parses strictly and ``Corruption.calls`` is ``None`` (:mod:`data_gen.corrupt.text_errors`).
- ``name``: tool-name typos and near-miss names (another tool from the list, or a look-alike), parameter-name typos
  and synonyms.
- ``content``: a dropped required parameter, an extra parameter, value type drift (``12`` -> ``"12"``), a wrong value.
- ``order``: swapped calls, a shuffled nested order (order-sensitive formats), split or merged steps (``order``).
- ``left_to_model``: what the default tier 1 leaves to the model: a parameter name in another case convention, a
  number written as text, a value in a one-item list, an undeclared parameter; and, given the request (``query``), a
  required value it states dropped from the call or a value it states altered (:mod:`data_gen.corrupt.query_errors`).

The last three change the call list (:mod:`data_gen.corrupt.call_errors`, with the look-alike names and values of
:mod:`data_gen.corrupt.mutations`). ``tools`` is read by :func:`refiner.specs.load_tools` (any dialect, or
``ToolSpec`` objects); a tool list it cannot read raises its :class:`~refiner.specs.SpecError`.

Every returned corruption changes something: its text either fails ``parse_strict`` in ``fmt`` or parses to calls
that differ from the gold (:func:`refiner.calls.same_calls`: by step groups for the ``order`` format, as a sequence
for order-sensitive formats, as a multiset otherwise). Attempts that change nothing are rejected, retried, and
counted in ``Corruption.rejected``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from data_gen.corrupt.call_errors import CALL_OPS
from data_gen.corrupt.labels import (  # noqa: F401  (the corruptor's public names, importable from here)
    ERROR_CLASSES,
    ERROR_GROUPS,
    GROUP_OF,
    TEXT_CLASSES,
    Corruption,
    CorruptionError,
    expand_classes,
)
from data_gen.corrupt.mutations import request_text
from data_gen.corrupt.query_errors import QUERY_OPS
from data_gen.corrupt.text_errors import TEXT_OPS
from refiner import formats
from refiner.calls import ToolCall, same_calls
from refiner.formats import FormatError, WireFormat
from refiner.specs import ToolSpec, by_name, load_tools

assert set(CALL_OPS) | set(TEXT_OPS) | set(QUERY_OPS) == set(ERROR_CLASSES)


def tool_index(tools: Iterable[Any] | None) -> dict[str, ToolSpec]:
    """The tool specs by name, read by :func:`refiner.specs.load_tools` (a list in any dialect, ``ToolSpec``
    objects, or text); ``{}`` for no tools. Raises :class:`refiner.specs.SpecError` naming the tool and field when
    the list cannot be read."""
    if tools is None:
        return {}
    if not isinstance(tools, (str, bytes, Mapping, list, tuple)):
        tools = list(tools)
    return by_name(load_tools(tools))


def changes_something(text: str, gold: Sequence[ToolCall], fmt: WireFormat | str) -> bool:
    """True when ``text`` is not a correct rendering of ``gold`` in ``fmt`` (it fails ``parse_strict`` or its calls
    differ)."""
    f = formats.get(fmt) if isinstance(fmt, str) else fmt
    try:
        parsed = f.parse_strict(text)
    except FormatError:
        return True
    return not same_calls(parsed, gold, f)


def corrupt(
    calls: Sequence[ToolCall],
    fmt: str,
    tools: Iterable[Any] | None,
    rng: random.Random | int,
    classes: Iterable[str] | str | None = None,
    *,
    n_errors: int = 1,
    max_tries: int = 40,
    query: Any = None,
) -> Corruption:
    """Renders ``calls`` in ``fmt`` with ``n_errors`` seeded errors drawn from ``classes`` (class or group names).
    ``query`` is the request (text or chat messages): the classes tied to what it states
    (``query_value_dropped``, ``query_value_altered``) apply only when it is given.

    Raises :class:`CorruptionError` when none of the classes applies to these calls, or when every attempt changed
    nothing."""
    f = formats.get(fmt)
    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    gold = list(calls)
    pool = expand_classes(classes)
    specs = tool_index(tools)
    request = request_text(query)
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
            if cls in QUERY_OPS:
                res = QUERY_OPS[cls](cur, specs, f, rng, request) if request else None
            else:
                res = CALL_OPS[cls](cur, specs, f, rng)
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
