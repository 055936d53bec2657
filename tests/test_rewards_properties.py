"""Property tests (Hypothesis) for the reward, in every registered wire format."""

from __future__ import annotations

import keyword

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refiner import formats
from refiner.calls import ToolCall, calls_equal, canonical_json
from rewards import Gold, compute_score, is_exact, make_ground_truth, parse_ground_truth, score_calls
from rewards.components import CallFeatures, order_reward, value_key

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Python keywords are left out: no pythonic format can name a tool ``if`` (render raises RenderError)
ident = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(lambda s: not keyword.iskeyword(s))
# Strings without angle brackets or control characters: a value holding a format's own closing tag is a limit of
# that format's syntax, not of the reward.
safe_text = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="<>"), max_size=12)
scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(-1e6, 1e6, allow_nan=False) | safe_text
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ident, inner, max_size=3),
    max_leaves=6,
)
calls_st = st.lists(st.builds(ToolCall, ident, st.dictionaries(ident, json_values, max_size=3)), min_size=1, max_size=4)


def gold_in(fmt: formats.WireFormat, calls: list[ToolCall]) -> tuple[str, list[ToolCall]]:
    """The calls as the format carries them: (answer text, parsed gold)."""
    answer = fmt.render(calls)
    return answer, fmt.parse_strict(answer)


@pytest.mark.parametrize("fmt_name", formats.names())
@SETTINGS
@given(calls=calls_st, upstream_calls=calls_st, variant=st.sampled_from(["paper", "strict"]))
def test_ground_truth_scores_one_in_every_format(fmt_name, calls, upstream_calls, variant):
    fmt = formats.get(fmt_name)
    answer, gold = gold_in(fmt, calls)
    gt = make_ground_truth(fmt_name, gold)
    upstream = fmt.render(upstream_calls)
    r = compute_score("p", answer, gt, {"upstream": upstream}, variant=variant)
    assert (r["score"], r["acc"], r["penalized"]) == (1.0, 1.0, 0.0)
    # with reasoning in front, too
    r = compute_score("p", "<think>\nfine\n</think>\n\n" + answer, gt, variant=variant)
    assert (r["score"], r["acc"]) == (1.0, 1.0)


@pytest.mark.parametrize("fmt_name", formats.names())
@SETTINGS
@given(gold_calls=calls_st, out_calls=calls_st, junk=st.text(max_size=60), variant=st.sampled_from(["paper", "strict"]))
def test_score_is_always_in_unit_interval(fmt_name, gold_calls, out_calls, junk, variant):
    fmt = formats.get(fmt_name)
    _, gold = gold_in(fmt, gold_calls)
    out_text = fmt.render(out_calls)
    for text in (out_text, junk, out_text[: len(out_text) // 2], junk + out_text):
        for upstream in (None, fmt.render(gold)):
            r = score_calls(text, gold, fmt, upstream=upstream, variant=variant)
            assert 0.0 <= r["score"] <= 1.0
            assert 0.0 <= r["normalized"] <= 1.0
            assert r["total_min"] <= r["total"] <= r["total_max"]
            assert r["acc"] in (0.0, 1.0)
            if r["acc"] == 1.0:
                assert r["score"] == 1.0
            if upstream is not None and text == upstream:
                assert r["penalized"] == 0.0


@pytest.mark.parametrize("fmt_name", [n for n in formats.names() if formats.get(n).order_sensitive])
@SETTINGS
@given(calls=calls_st.filter(lambda cs: len(cs) > 1), data=st.data())
def test_shuffled_order_never_beats_the_right_order(fmt_name, calls, data):
    fmt = formats.get(fmt_name)
    answer, gold = gold_in(fmt, calls)
    shuffled = data.draw(st.permutations(gold))
    right = score_calls(answer, gold, fmt, order_sensitive=True)
    r = score_calls(fmt.render(shuffled), gold, fmt, order_sensitive=True)
    assert right["order"] == 2.0
    assert r["order"] <= right["order"]
    assert r["score"] <= right["score"]
    g = CallFeatures.of(gold)
    o = CallFeatures.of(shuffled, by_step=g.by_step)
    assert order_reward(o, g) == r["order"]


@SETTINGS
@given(a=json_values, b=json_values)
def test_value_key_equality_is_canonical_json_equality(a, b):
    assert (value_key(a) == value_key(b)) == (canonical_json(a) == canonical_json(b))
    assert value_key(a) == value_key(a)


EDGE_VALUES = [
    0, 1, -1, 1.0, -0.0, 0.0, 1e16, 10**16, 0.1, 0.30000000000000004, float("inf"), float("-inf"), float("nan"),
    True, False, None, "1", "1.0", "true", "null", "NaN", [1], [1.0], [True], {"a": 1}, {"a": 1.0}, 2**70,
]  # fmt: skip


@pytest.mark.parametrize("a", EDGE_VALUES, ids=repr)
def test_value_key_equality_is_canonical_json_equality_on_edge_values(a):
    """Values Python calls equal but JSON does not (1, 1.0, True; 0.0, -0.0), and nan, which Python calls unequal to
    itself, key exactly as their canonical JSON compares."""
    for b in EDGE_VALUES:
        assert (value_key(a) == value_key(b)) == (canonical_json(a) == canonical_json(b)), (a, b)


@pytest.mark.parametrize("fmt_name", formats.names())
@SETTINGS
@given(calls=calls_st)
def test_strict_parse_calls_equal_lenient_calls_on_valid_text(fmt_name, calls):
    """The reward uses the strict calls when the text is valid; a lenient parse must agree with them."""
    fmt = formats.get(fmt_name)
    answer, gold = gold_in(fmt, calls)
    assert fmt.parse_lenient(answer).calls == gold


@SETTINGS
@given(calls=calls_st)
def test_ground_truth_json_and_dict_agree(calls):
    import json

    gt = make_ground_truth("hermes", calls)
    a, b = parse_ground_truth(gt), parse_ground_truth(json.loads(gt))
    assert a.calls == b.calls and a.order_sensitive == b.order_sensitive


@SETTINGS
@given(gold=calls_st, out=calls_st, data=st.data(), ordered=st.booleans())
def test_is_exact_agrees_with_calls_equal(gold, out, data, ordered):
    g = Gold.from_calls(gold, "hermes", ordered)
    # an equal list (arguments rebuilt in reverse key order), a permutation, and an unrelated list
    same = [ToolCall(c.name, dict(reversed(list(c.arguments.items())))) for c in gold]
    for cand in (same, data.draw(st.permutations(gold)), out, gold[:-1]):
        assert is_exact(cand, g) == calls_equal(cand, gold, ordered=ordered)
