"""Hand-computed values for every reward component, edge case, the normalisation, the penalty, acc and the variants."""

from __future__ import annotations

import json

import pytest

from refiner import formats
from refiner.calls import ToolCall
from rewards import (
    RESULT_KEYS,
    GroundTruthError,
    compute_score,
    make_ground_truth,
    parse_ground_truth,
    score_calls,
)
from rewards.components import CallFeatures, order_reward, param_content_reward, param_name_reward, tool_name_reward

H = formats.get("hermes")


def feats(*calls: ToolCall, by_step: bool | None = None) -> CallFeatures:
    return CallFeatures.of(list(calls), by_step=by_step)


def C(name: str, **args) -> ToolCall:
    return ToolCall(name, args)


# ---------------------------------------------------------------- components, hand computed


def test_tool_name_is_jaccard_over_sets():
    # O_n = {a, c}, G_n = {a, b}: |∩| = 1, |∪| = 3 -> 4/3 - 2
    assert tool_name_reward(feats(C("a"), C("c")), feats(C("a"), C("b"))) == pytest.approx(4 / 3 - 2)
    # duplicates do not matter in the paper variant (sets)
    assert tool_name_reward(feats(C("a"), C("a")), feats(C("a"))) == 2.0
    assert tool_name_reward(feats(C("x")), feats(C("a"))) == -2.0


def test_param_name_is_recall_over_unique_names():
    gold = feats(C("a", x=1, y=2), C("b", z=3, x=4))  # G_pn = {x, y, z}
    out = feats(C("a", x=1, y=2, w=0))  # O_pn = {x, y, w}: 2 of 3 recalled
    assert param_name_reward(out, gold) == pytest.approx(4 * 2 / 3 - 2)
    # extra names cost nothing in the paper variant
    assert param_name_reward(feats(C("a", x=1, y=1, z=1, q=1, r=1)), gold) == 2.0


def test_param_content_is_multiset_recall_with_typed_values():
    gold = feats(C("a", p=1, q="1"), C("b", r=1, s="s"))  # G_pc = {1: 2, "1": 1, "s": 1}
    out = feats(C("a", p=1, q="s"), C("b", r="s", s=12))  # O_pc = {1: 1, "s": 2, 12: 1}
    # overlap: min(1,2) for 1 + min(2,1) for "s" = 2 of |G_pc| = 4
    assert param_content_reward(out, gold) == pytest.approx(0.0)
    assert param_content_reward(feats(C("a", x="12")), feats(C("a", x=12))) == -2.0
    assert param_content_reward(feats(C("a", x=True)), feats(C("a", x=1))) == -2.0
    # key order inside object values does not matter (canonical JSON)
    assert param_content_reward(feats(C("a", x={"b": 1, "a": 2})), feats(C("a", x={"a": 2, "b": 1}))) == 2.0


def test_order_counts_positions_over_the_longer_sequence():
    gold = feats(C("a"), C("b"), C("c"))
    # o = a c b d: only position 1 matches; max(m, n) = 4
    assert order_reward(feats(C("a"), C("c"), C("b"), C("d")), gold) == pytest.approx(4 * 1 / 4 - 2)
    assert order_reward(feats(C("a"), C("b")), gold) == pytest.approx(4 * 2 / 3 - 2)
    assert order_reward(gold, gold) == 2.0


def test_order_on_steps_compares_tool_name_sets_per_step():
    def step(name, k):
        return ToolCall(name, {}, step=k)

    gold = feats(step("a", 1), step("b", 1), step("c", 2))
    same = feats(step("b", 1), step("a", 1), step("c", 2))  # order inside a step is free
    assert order_reward(same, gold) == 2.0
    swapped = feats(step("c", 1), step("a", 2), step("b", 2))
    assert order_reward(swapped, gold) == -2.0
    merged = feats(step("a", 1), step("b", 1), step("c", 1))  # one step of 3 vs 2 steps: 0 hits of 2
    assert order_reward(merged, gold) == -2.0


# ---------------------------------------------------------------- edge cases


def test_empty_output_with_nonempty_gold_scores_minus_two_everywhere():
    gold = feats(C("a", x=1), C("b", y=2))
    empty = feats()
    assert tool_name_reward(empty, gold) == -2.0
    assert param_name_reward(empty, gold) == -2.0
    assert param_content_reward(empty, gold) == -2.0
    assert order_reward(empty, gold) == -2.0


def test_empty_gold_names_union_empty_is_agreement():
    assert tool_name_reward(feats(), feats()) == 2.0
    assert tool_name_reward(feats(C("a")), feats()) == -2.0
    assert tool_name_reward(feats(), feats(), "strict") == 2.0
    assert order_reward(feats(C("a")), feats()) is None


def test_components_without_gold_parameters_are_not_applicable():
    gold = feats(C("a"), C("b"))
    assert param_name_reward(feats(C("a", x=1)), gold) is None
    assert param_content_reward(feats(C("a", x=1)), gold) is None
    assert param_name_reward(feats(C("a", x=1)), gold, "strict") is None


def test_no_parameter_gold_range_and_score():
    gold = [C("ping")]
    r = score_calls(H.render([C("pong")]), gold, "hermes")
    # format 1 + name -2 over range [-2, 3] (k = 1)
    assert (r["total"], r["total_min"], r["total_max"]) == (-1.0, -2.0, 3.0)
    assert r["score"] == pytest.approx(1 / 5)
    assert r["param_name_applicable"] == 0.0 and r["param_name"] == 0.0
    assert score_calls(H.render(gold), gold, "hermes")["score"] == 1.0


# ---------------------------------------------------------------- total, normalisation, format, acc


def test_normalisation_maps_the_per_sample_range_to_unit_interval():
    gold = [C("a", x=1, y=2, z=3), C("b", x=1)]
    out = [C("a", x=1, y=9, w=3), C("c", x=5)]
    r = score_calls(H.render(out), gold, "hermes")
    name = 4 * 1 / 3 - 2  # {a, c} vs {a, b}
    pname = 4 * 2 / 3 - 2  # {x, y, w} vs {x, y, z}
    pcontent = 4 * 2 / 4 - 2  # [1, 9, 3, 5] vs [1, 2, 3, 1]: overlap {1, 3} -> 2 of 4
    total = 1 + name + pname + pcontent
    assert r["total"] == pytest.approx(total)
    assert (r["total_min"], r["total_max"]) == (-6.0, 7.0)
    assert r["score"] == pytest.approx((total + 6) / 13)
    assert r["acc"] == 0.0 and r["format"] == 1.0


def test_broken_format_keeps_content_credit_but_loses_the_format_point():
    gold = [C("get_weather", city="Paris", days=3)]
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n'  # no close tag
    r = score_calls(broken, gold, "hermes")
    assert r["format"] == 0.0 and r["acc"] == 0.0
    assert (r["tool_name"], r["param_name"], r["param_content"]) == (2.0, 2.0, 2.0)
    assert r["score"] == pytest.approx((6 + 6) / 13)


def test_reasoning_before_calls_is_allowed():
    gold = [C("f", a=1)]
    text = "<think>the user wants f with a=1</think>\n" + H.render(gold)
    r = score_calls(text, gold, "hermes")
    assert r["score"] == 1.0 and r["acc"] == 1.0


def test_acc_respects_order_sensitivity():
    gold = [C("a", x=1), C("b", y=2)]
    swapped = H.render(gold[::-1])
    free = score_calls(swapped, gold, "hermes", order_sensitive=False)
    assert free["acc"] == 1.0 and free["score"] == 1.0 and free["order_applicable"] == 0.0
    strict = score_calls(swapped, gold, "hermes", order_sensitive=True)
    assert strict["acc"] == 0.0 and strict["order"] == -2.0 and strict["order_applicable"] == 1.0
    # total = 1 + 2 + 2 + 2 - 2 over [-8, 9]
    assert strict["score"] == pytest.approx((5 + 8) / 17)


def test_acc_needs_exact_values():
    gold = [C("a", x=12)]
    r = score_calls(H.render([C("a", x="12")]), gold, "hermes")
    assert r["acc"] == 0.0 and r["param_content"] == -2.0 and r["param_name"] == 2.0


# ---------------------------------------------------------------- regression penalty


def test_regression_penalty_zeroes_a_worse_refinement():
    gold = [C("a", x=1), C("b", y=2)]
    gt = make_ground_truth("hermes", gold)
    upstream = H.render(gold)  # upstream was already right
    worse = H.render(gold[:1])
    r = compute_score("src", worse, gt, {"upstream": upstream})
    assert r["penalized"] == 1.0 and r["score"] == 0.0
    assert r["upstream_total"] == 7.0 and r["has_upstream"] == 1.0
    assert r["normalized"] > 0.0  # the unpenalised value is still reported
    # same as upstream: no penalty; better than upstream: no penalty
    assert compute_score("src", upstream, gt, {"upstream": upstream})["score"] == 1.0
    better = compute_score("src", upstream, gt, {"upstream": worse})
    assert better["penalized"] == 0.0 and better["score"] == 1.0
    # no upstream, or penalty switched off
    assert compute_score("src", worse, gt, {})["penalized"] == 0.0
    off = compute_score("src", worse, gt, {"upstream": upstream}, regression_penalty=False)
    assert off["penalized"] == 0.0 and off["score"] == pytest.approx(off["normalized"])


def test_regression_penalty_compares_totals_of_broken_upstream_too():
    gold = [C("a", x=1)]
    gt = make_ground_truth("hermes", gold)
    upstream = '{"name": "a", "arguments": {"x": 1}}'  # right content, no tags: total 0 + 6
    r = compute_score("src", upstream, gt, {"upstream": upstream})
    assert r["upstream_total"] == 6.0 and r["penalized"] == 0.0
    assert compute_score("src", "nothing", gt, {"upstream": upstream})["penalized"] == 1.0


# ---------------------------------------------------------------- variants


def test_paper_variant_ignores_duplicates_and_unknown_params_strict_does_not():
    gold = [C("search", q="cats")]
    gt = make_ground_truth("hermes", gold)
    dup = H.render([C("search", q="cats"), C("search", q="cats")])
    extra = H.render([C("search", q="cats", color="red")])
    for text in (dup, extra):
        assert compute_score("s", text, gt)["score"] == 1.0
        assert compute_score("s", text, gt, variant="strict")["score"] < 1.0
        assert compute_score("s", text, gt)["acc"] == 0.0
    # strict, hand computed. duplicate call: names {search: 2} vs {search: 1} -> 1/2; (tool, param) pairs 1 of 2 out,
    # 1 gold -> F1 2/3; (param, value) pairs the same -> F1 2/3.
    r = compute_score("s", dup, gt, variant="strict")
    assert r["tool_name"] == pytest.approx(0.0)
    assert r["param_name"] == pytest.approx(4 * 2 / 3 - 2)
    assert r["param_content"] == pytest.approx(4 * 2 / 3 - 2)
    assert r["strict_variant"] == 1.0
    assert r["score"] == pytest.approx((1 + 0 + 2 * (4 * 2 / 3 - 2) + 6) / 13)  # the example in docs/rewards.md
    # unknown param: names unchanged (+2); pairs F1 = 2*1/(2+1) = 2/3 for names and contents
    r = compute_score("s", extra, gt, variant="strict")
    assert r["tool_name"] == 2.0
    assert r["param_name"] == pytest.approx(4 * 2 / 3 - 2)
    assert r["param_content"] == pytest.approx(4 * 2 / 3 - 2)


def test_strict_variant_gives_the_ground_truth_full_score():
    gold = [C("a", x=1, y=[1, 2]), C("a", x=1, y=[1, 2]), C("b")]
    assert score_calls(H.render(gold), gold, "hermes", variant="strict")["score"] == 1.0


def test_variant_from_extra_info_and_kwargs_precedence():
    gt = make_ground_truth("hermes", [C("a", x=1)])
    dup = H.render([C("a", x=1), C("a", x=1)])
    assert compute_score("s", dup, gt, {"reward_variant": "strict"})["strict_variant"] == 1.0
    # the trainer config (kwargs) wins over a per-sample field
    assert compute_score("s", dup, gt, {"reward_variant": "strict"}, variant="paper")["score"] == 1.0
    with pytest.raises(ValueError, match="variant"):
        compute_score("s", dup, gt, variant="nope")


# ---------------------------------------------------------------- verl contract and ground truth schema


def test_result_has_fixed_float_keys_in_every_case():
    gt = make_ground_truth("hermes", [C("a", x=1)])
    gt_noparams = make_ground_truth("hermes", [C("a")], order_sensitive=True)
    for g in (gt, gt_noparams):
        for text in ("", "junk", H.render([C("a", x=1)]), "<tool_call>{", None, b"\xff\xfe"):
            r = compute_score("s", text, g, {"upstream": "x"} if text else None, reward_router_address=None)
            assert tuple(r) == RESULT_KEYS
            assert all(type(v) is float for v in r.values())
            assert 0.0 <= r["score"] <= 1.0


def test_ground_truth_accepts_dict_and_json_string():
    answer = H.render([C("a", x=1)])
    as_dict = {"format": "hermes", "answer": answer, "order_sensitive": False}
    assert compute_score("s", answer, as_dict)["score"] == 1.0
    assert compute_score("s", answer, json.dumps(as_dict))["score"] == 1.0
    # order_sensitive defaults to the format's own flag
    assert parse_ground_truth({"format": "hermes", "answer": answer}).order_sensitive is H.order_sensitive


@pytest.mark.parametrize(
    ("gt", "field"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ({"answer": "x"}, "'format' is missing"),
        ({"format": 3, "answer": "x"}, "'format' must be a string"),
        ({"format": "nosuchformat", "answer": "x"}, "'format': unknown wire format"),
        ({"format": "hermes"}, "'answer' is missing"),
        ({"format": "hermes", "answer": ["x"]}, "'answer' must be a string"),
        ({"format": "hermes", "answer": "no calls here"}, "'answer' is not valid hermes"),
        (
            {"format": "hermes", "answer": '<tool_call>{"name": "a"}</tool_call>', "order_sensitive": "yes"},
            "'order_sensitive'",
        ),
        (42, "ground_truth must be"),
    ],
)
def test_bad_ground_truth_raises_naming_the_field(gt, field):
    with pytest.raises(GroundTruthError, match=field):
        compute_score("s", "anything", gt)


# ---------------------------------------------------------------- real data


def _api_bank_calls(answer) -> list[ToolCall]:
    items = answer if isinstance(answer, list) else [answer]
    return [ToolCall(a["name"], a.get("parameters") or {}) for a in items]


def test_api_bank_gold_scores_one_and_perturbations_score_less(api_bank_levels):
    n = 0
    for records in api_bank_levels.values():
        for rec in records:
            gold = _api_bank_calls(rec["answer"])
            r = score_calls(H.render(gold), gold, "hermes")
            assert (r["score"], r["acc"]) == (1.0, 1.0)
            # drop one argument (when there is one): recall drops, acc goes
            first = gold[0]
            if first.arguments:
                k = min(first.arguments)
                cut = [ToolCall(first.name, {kk: v for kk, v in first.arguments.items() if kk != k})] + gold[1:]
                r2 = score_calls(H.render(cut), gold, "hermes")
                assert r2["acc"] == 0.0 and r2["param_name"] < 2.0 and r2["score"] < 1.0
            n += 1
    assert n == 399 + 67 + 131


def test_nestools_swapped_calls_lose_order_reward(nestools_records):
    checked = 0
    for rec in nestools_records:
        gold = [ToolCall(c["api_name"], c.get("parameters") or {}) for c in rec["call"]]
        if len(gold) < 2 or gold[0].name == gold[1].name:
            continue
        swapped = [gold[1], gold[0], *gold[2:]]
        r_ok = score_calls(H.render(gold), gold, "hermes", order_sensitive=True)
        r_sw = score_calls(H.render(swapped), gold, "hermes", order_sensitive=True)
        assert r_ok["order"] == 2.0 and r_ok["score"] == 1.0
        assert r_sw["order"] < 2.0 and r_sw["acc"] == 0.0
        # everything but order is unchanged by a swap
        assert (r_sw["tool_name"], r_sw["param_name"], r_sw["param_content"]) == (2.0, 2.0, 2.0)
        checked += 1
    assert checked > 500


# ---------------------------------------------------------------- the real order-sensitive formats


def _order_text(*steps: list[str]) -> str:
    body = ", ".join(json.dumps({"step": i + 1, "tool_list": names}) for i, names in enumerate(steps))
    return f"<order_func>[{body}]</order_func>"


def test_order_format_scores_steps_and_skips_parameter_components():
    gt = make_ground_truth("order", formats.get("order").parse_strict(_order_text(["a", "b"], ["c"])))
    assert parse_ground_truth(gt).order_sensitive  # the format's default
    same = compute_score("s", _order_text(["b", "a"], ["c"]), gt)  # order inside a step is free
    assert (same["score"], same["acc"], same["order"]) == (1.0, 1.0, 2.0)
    assert same["param_name_applicable"] == same["param_content_applicable"] == 0.0
    assert (same["total_min"], same["total_max"]) == (-4.0, 5.0)  # k = 2: name and order
    moved = compute_score("s", _order_text(["a"], ["b", "c"]), gt)
    # names {a, b, c} all right; steps ({a}, {b, c}) vs ({a, b}, {c}): no step matches -> order -2
    assert (moved["tool_name"], moved["order"], moved["acc"]) == (2.0, -2.0, 0.0)
    assert moved["score"] == pytest.approx((1 + 2 - 2 + 4) / 9)
    partial = compute_score("s", _order_text(["a", "b"], ["d"], ["c"]), gt)
    # step 1 matches, 3 steps vs 2 -> 4 * 1/3 - 2; names {a, b, c, d} vs {a, b, c} -> 4 * 3/4 - 2
    assert partial["order"] == pytest.approx(4 / 3 - 2)
    assert partial["tool_name"] == pytest.approx(1.0)


def test_nestools_format_on_real_records(nestools_records):
    fmt = formats.get("nestools")
    checked = 0
    for rec in nestools_records[:300]:
        gold = [
            ToolCall(c["api_name"], c.get("parameters") or {}, outputs=tuple(c.get("responses") or ()))
            for c in rec["call"]
        ]
        answer = fmt.render(gold)
        gt = make_ground_truth("nestools", fmt.parse_strict(answer))
        r = compute_score("nestools", answer, gt)
        assert (r["score"], r["acc"], r["order_applicable"]) == (1.0, 1.0, 1.0)
        if len(gold) > 1 and gold[0].name != gold[-1].name:
            rev = compute_score("nestools", fmt.render(gold[::-1]), gt, {"upstream": answer})
            assert rev["order"] < 2.0 and rev["acc"] == 0.0 and rev["penalized"] == 1.0
            checked += 1
    assert checked > 100


def test_output_labels_count_for_acc_only():
    """NesTools ``responses`` / NESTFUL labels are part of a call's identity (acc), not of the paper's components."""
    fmt = formats.get("nestools")
    gold = [
        ToolCall("a", {"x": 1}, outputs=("API_call_0",)),
        ToolCall("b", {"y": "API_call_0"}, outputs=("API_call_1",)),
    ]
    gt = make_ground_truth("nestools", gold)
    relabeled = [ToolCall("a", {"x": 1}, outputs=("API_call_9",)), gold[1]]
    r = compute_score("s", fmt.render(relabeled), gt)
    assert r["score"] == 1.0 and r["acc"] == 0.0


def test_answers_longer_than_the_strict_cap_are_format_errors_read_leniently():
    """An answer over STRICT_ANSWER_CHARS (after the reasoning) loses the format point and keeps content credit from
    the lenient reading of its start; a long reasoning before a short answer does not count against it."""
    from rewards.score import LENIENT_ANSWER_CHARS, STRICT_ANSWER_CHARS, parse_output

    gold = [C("search", q="x", n=1)]
    answer = H.render(gold)
    prose = "\nmore words" * (STRICT_ANSWER_CHARS // 10)  # text after the blocks: allowed by hermes' strict parser
    long_answer = answer + prose
    assert H.parse_strict(long_answer) == gold  # valid in the format itself
    assert parse_output(long_answer, H) == (False, gold)
    r = score_calls(long_answer, gold, "hermes")
    assert r["format"] == 0.0 and r["tool_name"] == 2.0 and r["param_content"] == 2.0
    just_under = answer + prose[: STRICT_ANSWER_CHARS - len(answer)]
    assert parse_output(just_under, H) == (True, gold)
    thinking = "<think>" + "x" * (2 * STRICT_ANSWER_CHARS) + "</think>\n"
    assert score_calls(thinking + answer, gold, "hermes")["score"] == 1.0
    # the lenient reading stops after LENIENT_ANSWER_CHARS: a call beyond it is not seen
    late = "<tool_call>" + " " * LENIENT_ANSWER_CHARS + answer[len("<tool_call>") :] + prose
    assert parse_output(late, H) == (False, [])


def test_a_whole_training_response_of_answer_text_stays_under_the_strict_cap(nestools_records):
    """The paper caps responses at 4,096 tokens: that many tokens of real answers (NesTools calls rendered in every
    format, counted with Qwen3's tokenizer) is fewer characters than STRICT_ANSWER_CHARS, so the cap never takes the
    format point from a response the trainer would keep."""
    from conftest import qwen_tokenizer_dir
    from tokenizers import Tokenizer

    from rewards.score import STRICT_ANSWER_CHARS

    tok = Tokenizer.from_file(str(qwen_tokenizer_dir() / "tokenizer.json"))
    for fmt in formats.all_formats():
        chars = tokens = 0
        for rec in nestools_records[:300]:
            calls = [
                ToolCall(c["api_name"], c.get("parameters") or {}, tuple(c.get("responses") or ())) for c in rec["call"]
            ]
            if fmt.name == "order":
                calls = [ToolCall(c.name, {}, step=i + 1) for i, c in enumerate(calls)]
            text = fmt.render(calls)
            chars += len(text)
            tokens += len(tok.encode(text).ids)
        assert 4096 * chars / tokens < 0.75 * STRICT_ANSWER_CHARS, fmt.name
