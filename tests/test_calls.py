"""Call-list equality, defined once in refiner.calls: as sequences or multisets, and in a wire format's terms."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall, calls_equal, has_steps, same_calls, steps_of

A, B = ToolCall("a", {"x": 1}), ToolCall("b", {"y": "2"})


def test_calls_equal_as_sequence_or_multiset():
    assert calls_equal([A, B], [A, B], ordered=True)
    assert not calls_equal([A, B], [B, A], ordered=True)
    assert calls_equal([A, B], [B, A], ordered=False)
    assert not calls_equal([A, A], [A], ordered=False)  # multisets: a repeated call counts
    assert not calls_equal([ToolCall("a", {"x": 1})], [ToolCall("a", {"x": "1"})], ordered=False)  # types kept


@pytest.mark.parametrize("fmt", formats.names())
def test_same_calls_follows_the_format_order_rule(fmt):
    f = formats.get(fmt)
    assert same_calls([A, B], [A, B], f)
    assert same_calls([A, B], [B, A], f) is (not f.order_sensitive)
    assert not same_calls([A, B], [A], f)


def test_same_calls_by_step_groups():
    order = formats.get("order")
    plan = [ToolCall("a", {}, step=1), ToolCall("b", {}, step=1), ToolCall("c", {}, step=2)]
    within_step = [ToolCall("b", {}, step=1), ToolCall("a", {}, step=1), ToolCall("c", {}, step=2)]
    renumbered = [ToolCall("a", {}, step=3), ToolCall("b", {}, step=3), ToolCall("c", {}, step=7)]
    merged = [ToolCall("a", {}, step=1), ToolCall("b", {}, step=1), ToolCall("c", {}, step=1)]
    split = [ToolCall("a", {}, step=1), ToolCall("b", {}, step=2), ToolCall("c", {}, step=3)]
    assert has_steps(plan) and not has_steps([A]) and not has_steps([])
    assert same_calls(within_step, plan, order)  # tools of one step run in any order
    assert same_calls(renumbered, plan, order)  # only the grouping and the order of the steps count
    assert not same_calls(merged, plan, order) and not same_calls(split, plan, order)
    assert steps_of(plan) == [frozenset({"a", "b"}), frozenset({"c"})]
    # a list without steps against one with steps: compared as calls, where the step is part of a call
    assert not same_calls([ToolCall("a", {}), ToolCall("b", {}), ToolCall("c", {})], plan, order)
