"""Rule corruptor: every class applies to real calls, labels are honest, nothing returned is a no-op, seeded."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from data_gen.corrupt import rules
from data_gen.corrupt.rules import (
    ERROR_CLASSES,
    ERROR_GROUPS,
    CorruptionError,
    changes_something,
    corrupt,
)
from refiner import formats
from refiner.calls import ToolCall, same_calls
from refiner.formats import FormatError
from refiner.specs import SpecError, load_tools


def _glaive_cases(glaive_records, limit=40):
    """(calls, tools) from the real Glaive subset: each function_call turn with its tool list."""
    cases = []
    for rec in glaive_records:
        tools = json.loads(rec["tools"]) if rec.get("tools") else []
        for turn in rec["conversations"]:
            if turn["from"] == "function_call":
                obj = json.loads(turn["value"])
                cases.append(([ToolCall(obj["name"], obj.get("arguments") or {})], tools))
        if len(cases) >= limit:
            break
    return cases


def _nestools_cases(nestools_records, limit=40):
    return [
        (
            [ToolCall(c["api_name"], c["parameters"], tuple(c.get("responses") or ())) for c in rec["call"]],
            rec["api"],
        )
        for rec in nestools_records[:limit]
    ]


def _assert_honest(c, gold, fmt):
    f = formats.get(fmt)
    assert c.error_classes and set(c.error_classes) <= set(ERROR_CLASSES)
    assert changes_something(c.text, gold, fmt)
    if set(c.error_classes) & rules.TEXT_CLASSES:
        assert c.calls is None
        with pytest.raises(FormatError):
            f.parse_strict(c.text)
    else:
        parsed = f.parse_strict(c.text)
        assert parsed == c.calls
        assert not same_calls(parsed, gold, f)


@pytest.mark.parametrize("cls", ERROR_GROUPS["format"] + ERROR_GROUPS["name"] + ERROR_GROUPS["content"])
def test_each_class_on_real_glaive_calls_in_hermes(glaive_records, cls):
    applied = 0
    for k, (gold, tools) in enumerate(_glaive_cases(glaive_records)):
        try:
            c = corrupt(gold, "hermes", tools, random.Random(k), [cls])
        except CorruptionError:
            assert cls in ("missing_required_param", "param_name_typo", "param_name_synonym", "value_type_drift",
                           "wrong_value") and not gold[0].arguments
            continue
        assert c.error_classes == (cls,)
        _assert_honest(c, gold, "hermes")
        applied += 1
    assert applied >= 20


def test_value_type_drift_keeps_content_changes_type():
    gold = [ToolCall("generate_password", {"length": 12})]
    c = corrupt(gold, "hermes", None, 0, ["value_type_drift"])
    assert c.calls == [ToolCall("generate_password", {"length": "12"})]


def test_missing_required_only_drops_required_params():
    tools = [{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"},
                                                                           "b": {"type": "string"}},
                                          "required": ["a"]}}]
    for seed in range(10):
        c = corrupt([ToolCall("f", {"a": "x", "b": "y"})], "hermes", tools, seed, ["missing_required_param"])
        assert c.calls == [ToolCall("f", {"b": "y"})]


def test_near_miss_prefers_real_tool_names(glaive_records):
    tools = [{"name": "get_weather", "parameters": {}}, {"name": "get_forecast", "parameters": {}}]
    names = {corrupt([ToolCall("get_weather", {"city": "Oslo"})], "hermes", tools, s,
                     ["tool_name_near_miss"]).calls[0].name for s in range(30)}
    assert "get_forecast" in names and "get_weather" not in names


def test_seeded_and_deterministic(glaive_records):
    gold, tools = _glaive_cases(glaive_records, 1)[0]
    a = [corrupt(gold, "hermes", tools, random.Random(7)) for _ in range(3)]
    assert len({(x.text, x.error_classes) for x in a}) == 1
    texts = {corrupt(gold, "hermes", tools, random.Random(s)).text for s in range(20)}
    assert len(texts) > 5


def test_groups_and_unknown_names():
    gold = [ToolCall("f", {"a": 1})]
    c = corrupt(gold, "hermes", None, 3, "content")
    assert c.groups == ("content",) and c.error_classes[0] in ERROR_GROUPS["content"]
    with pytest.raises(ValueError, match="unknown error class"):
        corrupt(gold, "hermes", None, 0, ["no_such_class"])
    with pytest.raises(CorruptionError, match="applies"):
        corrupt(gold, "hermes", None, 0, ["swapped_calls"])  # hermes is not order-sensitive


def test_several_errors_at_once():
    gold = [ToolCall("find_hotels", {"city": "Rome", "stars": 4, "pool": True})]
    c = corrupt(gold, "hermes", None, 11, ["name", "content"], n_errors=2)
    assert len(c.error_classes) == 2
    _assert_honest(c, gold, "hermes")


def test_no_op_attempts_are_rejected_and_counted(monkeypatch):
    seen = {"n": 0}

    def lazy_then_real(calls, tools, fmt, rng):
        seen["n"] += 1
        if seen["n"] <= 2:
            return list(calls), "no change"
        return [ToolCall(calls[0].name, {"a": 2})], "a -> 2"

    monkeypatch.setitem(rules.CALL_OPS, "wrong_value", lazy_then_real)
    c = corrupt([ToolCall("f", {"a": 1})], "hermes", None, 0, ["wrong_value"])
    assert c.rejected == 2 and c.calls == [ToolCall("f", {"a": 2})]
    monkeypatch.setitem(rules.CALL_OPS, "wrong_value", lambda calls, *a: (list(calls), "never"))
    with pytest.raises(CorruptionError, match="changed anything"):
        corrupt([ToolCall("f", {"a": 1})], "hermes", None, 0, ["wrong_value"], max_tries=5)


@pytest.mark.parametrize("fmt", ["glaive", "toolace", "xlam", "nestools", "hermes"])
def test_all_classes_honest_in_each_format(glaive_records, fmt):
    f = formats.get(fmt)
    cases = _glaive_cases(glaive_records, 25)
    for k, (gold, tools) in enumerate(cases):
        for cls in ERROR_CLASSES:
            try:
                c = corrupt(gold, fmt, tools, random.Random(k * 100 + len(cls)), [cls])
            except CorruptionError:
                continue
            _assert_honest(c, gold, f.name)


@pytest.mark.parametrize("cls", ["swapped_calls", "shuffled_order", "wrong_value", "broken_json", "missing_tag"])
def test_nested_order_corruptions_on_real_nestools(nestools_records, cls):
    for k, (gold, tools) in enumerate(_nestools_cases(nestools_records, 30)):
        c = corrupt(gold, "nestools", tools, random.Random(k), [cls])
        _assert_honest(c, gold, "nestools")
        if cls in ("swapped_calls", "shuffled_order"):
            assert sorted(map(repr, c.calls)) == sorted(map(repr, gold))


@pytest.mark.parametrize("cls", ["split_step", "merge_steps", "shuffled_order", "tool_name_typo", "broken_json"])
def test_order_format_step_corruptions(nestools_records, cls):
    for k, rec in enumerate(nestools_records[:30]):
        gold = [ToolCall(c["api_name"], {}, step=i + 1) for i, c in enumerate(rec["call"])]
        try:
            c = corrupt(gold, "order", rec["api"], random.Random(k), [cls])
        except CorruptionError:
            assert cls == "split_step"  # every step holds one tool
            continue
        _assert_honest(c, gold, "order")


def _cases_for(fmt, glaive_records, nestools_records):
    """Real gold calls shaped for ``fmt``: step plans for ``order``; single Glaive calls (one with no arguments)
    and multi-call NesTools chains for every other format."""
    if fmt == "order":
        return [[ToolCall(c["api_name"], {}, step=i + 1) for i, c in enumerate(rec["call"])]
                for rec in nestools_records[:4]] + [
               [ToolCall("a", {}, step=1), ToolCall("b", {}, step=1), ToolCall("c", {}, step=2)]]
    cases = [gold for gold, _ in _glaive_cases(glaive_records, 4)]
    cases.append([ToolCall("get_time", {})])
    cases += [gold for gold, _ in _nestools_cases(nestools_records, 3)]
    return cases


def test_every_class_in_every_registered_format_never_crashes(glaive_records, nestools_records):
    """Every error class x every registered format x several seeds: ``corrupt`` returns an honest Corruption or
    raises CorruptionError (not applicable / nothing changed), which the builder counts; nothing else escapes."""
    applied, not_applicable = Counter(), Counter()
    for fmt in formats.names():
        f = formats.get(fmt)
        for raw in _cases_for(fmt, glaive_records, nestools_records):
            try:
                gold = f.parse_strict(f.render(raw))  # the calls as this format expresses them
            except Exception:
                gold = raw  # a format that cannot carry these calls: corrupt() must still only raise CorruptionError
            for cls in ERROR_CLASSES:
                for seed in range(3):
                    try:
                        c = corrupt(gold, fmt, None, random.Random(seed), [cls])
                    except CorruptionError:
                        not_applicable[fmt] += 1
                        continue
                    assert c.error_classes == (cls,)
                    _assert_honest(c, gold, fmt)
                    applied[(fmt, cls)] += 1
    for fmt in formats.names():
        # every format takes errors of every group it can express (sequence errors only in order-sensitive formats)
        groups = {rules.GROUP_OF[cls] for (f, cls) in applied if f == fmt}
        want = {"format", "name"} | ({"sequence"} if formats.get(fmt).order_sensitive else set())
        assert want <= groups, (fmt, sorted(groups))
    assert ("nestful", "wrong_tag") not in applied  # bare bracket markers: not applicable, never an IndexError
    assert ("hermes", "wrong_tag") in applied and not_applicable["nestful"] > 0


def test_wrong_tag_on_bare_bracket_markers_is_not_applicable(nestools_records):
    gold = _nestools_cases(nestools_records, 1)[0][0]
    for seed in range(10):
        with pytest.raises(CorruptionError, match="applies"):
            corrupt(gold, "nestful", None, seed, ["wrong_tag"])


def test_tools_are_read_by_the_spec_loader_in_any_form(glaive_records):
    """Raw dicts in the source's dialect, the same tools as ToolSpec objects, or as JSON text: the same corruption."""
    for k, (gold, tools) in enumerate(_glaive_cases(glaive_records, 15)):
        for cls in ("tool_name_near_miss", "extra_param", "missing_required_param", "wrong_value"):
            got = []
            for given in (tools, load_tools(tools), json.dumps(tools)):
                try:
                    got.append(corrupt(gold, "hermes", given, random.Random(k), [cls]))
                except CorruptionError as e:
                    got.append(str(e))
            assert got[0] == got[1] == got[2]


def test_an_unreadable_tool_list_is_an_error_naming_the_tool():
    gold = [ToolCall("f", {"a": 1})]
    with pytest.raises(SpecError, match="tool 1"):
        corrupt(gold, "hermes", [{"name": "f", "parameters": {}}, "not a tool"], 0, ["extra_param"])
    with pytest.raises(SpecError, match="cannot recognise"):
        corrupt(gold, "hermes", [{"title": "no name, no dialect"}], 0, ["extra_param"])
