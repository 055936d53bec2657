"""Bounded work for any input, checked by counts (never by time: ``benchmarks/bench_worst_case.py`` measures the
50 ms bound): every public entry point, through every registered format, on the hostile inputs of ``tests/hostile.py``
(bracket, paren, quote and tag storms from every format's markers, deep nesting, repeated blocks, huge numbers, very
long strings, thousands of calls, texts cut short). Each raises only its documented error, gives the same result
twice, and hands the costly steps (json_repair, ast, name similarity, value checks) bounded amounts of work.
"""

from __future__ import annotations

import inspect
import itertools
import json
import random
import sys

import pytest
from hostile import family_texts, format_texts, hostile_calls, hostile_texts, repair_cost

from refiner import formats
from refiner.calls import ToolCall, canonical_json, preview, value_depth
from refiner.formats import brace_kv, jsonfix, pythonic, pythonic_scan, pythonic_sentinels
from refiner.gate import MAX_CHECKED_VALUES, check_calls, check_text
from refiner.pipeline import Refiner, RequestError, prepare
from refiner.repair import MAX_NAME_COMPARISONS, repair_calls, repair_text
from refiner.specs import load_tools
from rewards import RESULT_KEYS, compute_score, make_ground_truth

ALL = [f.name for f in formats.by_rank()]
SIZE = 3_000  # characters per storm in the per-format sweeps (the counts below do not depend on it)
BIG = formats.MAX_LENIENT_CHARS  # the size the bound is stated for
TOOLS = [
    {
        "name": "book_table",
        "parameters": {
            "type": "object",
            "properties": {
                "restaurant": {"type": "string", "pattern": "^[A-Za-z ]+$"},
                "people": {"type": "integer", "minimum": 1},
                "dishes": {"type": "array", "items": {"type": "string", "enum": ["soup", "fish"]}},
                "contact": {"type": "object", "properties": {"phone": {"type": "string"}}, "required": ["phone"]},
            },
            "required": ["restaurant", "people"],
        },
    },
    {"name": "cancel_booking", "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}}},
    {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}},
]
SPECS = {s.name: s for s in load_tools(TOOLS)}
# Grammars whose values are not JSON and are read by their own reader (no json_repair).
OWN_VALUE_READERS = ("refiner.formats.brace_kv",)
# json_repair is quadratic on a run of '(' (a tuple opener to it): the repair region's bound counts them too.
PAREN_KEY = '<func_call>[{"name": "f", "arguments": {"a": 1, "b"' + "(" * 5000 + "}}]</func_call>"


def _texts(fmt: formats.WireFormat, size: int) -> list[tuple[str, str]]:
    return hostile_texts(size) + format_texts(fmt, size)


@pytest.fixture
def json_repair_inputs(monkeypatch):
    """Every text handed to json_repair, in order."""
    import json_repair

    seen: list[str] = []
    real = json_repair.loads
    monkeypatch.setattr(json_repair, "loads", lambda t, *a, **k: seen.append(t) or real(t, *a, **k))
    return seen


def _assert_lenient(got: formats.Lenient) -> None:
    assert isinstance(got, formats.Lenient)
    assert all(isinstance(c, ToolCall) for c in got.calls)
    assert all(p.code in formats.PROBLEM_CODES for p in got.problems)
    assert not [p for p in got.problems if p.code == "internal"], got.problems[:3]
    for c in got.calls:  # what any later step (the gate, repair, the reward, a JSON result) can take
        assert value_depth(c.arguments, formats.MAX_ARGUMENT_DEPTH) <= formats.MAX_ARGUMENT_DEPTH
        canonical_json(dict(c.arguments))


@pytest.mark.parametrize("name", ALL)
def test_parsers_raise_only_their_error_and_repeat_themselves(name):
    assert_contract_on_storms(formats.get(name), SIZE)


def assert_contract_on_storms(fmt: formats.WireFormat, size: int) -> None:
    """On every storm: ``parse_strict`` raises only its error, ``parse_lenient`` gives the same answer twice and
    agrees with a strict success, detection is deterministic (also used for rows derived at run time)."""
    for kind, text in _texts(fmt, size):
        try:
            strict = fmt.parse_strict(text)
        except formats.FormatError:
            strict = None
        first, again = fmt.parse_lenient(text), fmt.parse_lenient(text)
        _assert_lenient(first)
        assert (first.calls, first.problems, first.cut) == (again.calls, again.problems, again.cut), kind
        if strict is not None:
            assert first.ok and first.calls == strict, kind
        assert formats.detect_format(text) == formats.detect_format(text)


@pytest.mark.parametrize("name", ALL)
def test_json_repair_sees_bounded_regions_within_the_budget(name, json_repair_inputs):
    """json_repair is handed regions whose estimated cost is at most REPAIR_REGION_COST (at most REPAIR_REGION_CHARS
    characters, fewer than REPAIR_REGION_OPENS openers), and one parse spends at most REPAIR_TOTAL_COST (plus the
    region that crossed it): at full size, on the storms that made it quadratic, through every format."""
    fmt = formats.get(name)
    storms = [t for k, t in _texts(fmt, BIG) if "storm" in k or "deep" in k] + [PAREN_KEY]
    used = False
    for text in storms:
        json_repair_inputs.clear()
        fmt.parse_lenient(text)
        regions = list(json_repair_inputs)
        used |= bool(regions)
        costs = [repair_cost(r) for r in regions]
        assert all(len(r) <= jsonfix.REPAIR_REGION_CHARS for r in regions)
        assert all(sum(map(r.count, "{[(")) < jsonfix.REPAIR_REGION_OPENS for r in regions)
        assert all(c <= jsonfix.REPAIR_REGION_COST for c in costs)
        assert sum(costs) <= jsonfix.REPAIR_TOTAL_COST + jsonfix.REPAIR_REGION_COST, (len(costs), sum(costs))
        json_repair_inputs.clear()
        fmt.parse_lenient(text)
        assert json_repair_inputs == regions  # counted, so the same text gets the same work
    # (the storms reached json_repair, so the bounds above were checked on real work; a format that writes its values
    # as untyped text, the XML dialects, reads a storm in a value as the text it is and repairs no JSON there, and a
    # grammar with a value syntax of its own, brace_kv, reads it with its own linear reader)
    assert used or type(fmt).retype is not formats.WireFormat.retype or type(fmt).__module__ in OWN_VALUE_READERS


def _repair_region(text: str) -> str:
    return jsonfix._region(text)[0]


def test_the_estimate_is_what_is_charged_and_bounds_parens():
    """The region cuts where the estimate reaches the cap, and repair_cost of the region is that estimate; a run
    of '(' after a key (the issue's input) is cut to a short region, where counting '{' alone let 4 KB through."""
    for text in ['{"a": 1, "b"' + "(" * 5000, "{" * 5000, "{]" * 3000, "x" * 9000, '{"a": [' * 2000, ")" * 9000]:
        region = _repair_region(text)
        assert text.startswith(region)
        assert repair_cost(region) <= jsonfix.REPAIR_REGION_COST
        assert jsonfix._region(text) == (region, repair_cost(region))
    assert len(_repair_region('{"a": 1, "b"' + "(" * 5000)) < 200
    balanced = json.dumps([{"name": f"f{i}", "arguments": {"a": [i, i]}} for i in range(40)])
    assert _repair_region(balanced + ",") == (balanced + ",")[: len(_repair_region(balanced + ","))]


def test_the_reported_input_is_cheap_through_every_entry_point(json_repair_inputs):
    """The issue's 5 KB input, through the lenient parsers, detection, tier 1, the pipeline and the reward: what
    json_repair is handed stays within one parse budget per parse (a count, the same on any machine)."""
    per_parse = jsonfix.REPAIR_TOTAL_COST + jsonfix.REPAIR_REGION_COST
    for name in ALL:
        json_repair_inputs.clear()
        formats.get(name).parse_lenient(PAREN_KEY)
        assert sum(map(repair_cost, json_repair_inputs)) <= per_parse
    json_repair_inputs.clear()
    res = Refiner().refine({"tools": TOOLS, "upstream": PAREN_KEY})
    assert res["stage"] in ("unchanged", "repaired", "truncated")
    # detection, the upstream's parse, and the repaired text's parse (valid: no repair)
    assert sum(map(repair_cost, json_repair_inputs)) <= 3 * per_parse
    gt = make_ground_truth("xlam", [ToolCall("f", {"a": 1})])
    json_repair_inputs.clear()
    r = compute_score("x", PAREN_KEY, gt, {"upstream": PAREN_KEY})
    assert tuple(r) == RESULT_KEYS
    assert sum(map(repair_cost, json_repair_inputs)) <= 2 * per_parse


def test_items_read_per_parse_are_counted():
    """A block of 100,000 JSON values, 18,000 tag blocks, 100,000 list items: at most MAX_RECOVERED_ITEMS read,
    and the parse says it gave up."""
    n = jsonfix.MAX_RECOVERED_ITEMS
    cases = [
        ("hermes", "<tool_call>" + '""' * 100_000),
        ("hermes", "<tool_call>{" * 18_000),
        ("glaive", "<functioncall> {" * 13_000),
        ("apibank", "<tool_call>\n" + '{"name": "f", "parameters": {}}\n' * 6_000),
        ("xlam", "<func_call>[" + '{"name": "f", "arguments": {}}, ' * 6_000),
        ("nestful", "[" + '{"name": "f", "arguments": {}, "label": "$v"}, ' * 4_000),
        ("order", '<order_func>[{"step": 1, "tool_list": [' + '"a", ' * 40_000),
        ("qwen3_coder", "<tool_call>\n<function=f>\n</function>\n" * 6_000),
        ("qwen3_coder", "<tool_call>\n<function=f>\n" + "<parameter=a>\nx\n</parameter>\n" * 6_000),
        ("glm45", "<tool_call>f\n<arg_key>a</arg_key><arg_value>x</arg_value>\n" * 4_000),
        ("deepseek_v31", "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>" * 4_000),
        ("kimi_k2", "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|>" * 3_000),
        ("harmony", "<|start|>assistant<|channel|>commentary to=functions.f <|message|>{}<|call|>x" * 3_000),
    ]
    for name, text in cases:
        got = formats.get(name).parse_lenient(text)
        dropped = ("not_a_call", "no_name", "unnamed_call", "unreadable")
        assert len(got.calls) + sum(p.code in dropped for p in got.problems) <= n
        assert any(p.code == "gave_up" for p in got.problems), name


def test_one_call_per_line_recovery_bounds_its_parenthesis_matching(monkeypatch):
    """OLMo 3's recovery matches parentheses in at most MAX_SPLIT_CHARS characters of a block in all, on a 200 KB
    storm in a value and on thousands of call lines, and still reads the complete calls before them."""
    from refiner.formats import pythonic_sentinels

    matched: list[int] = []
    real = pythonic_sentinels.matching_paren
    monkeypatch.setattr(pythonic_sentinels, "matching_paren", lambda src, at: matched.append(len(src)) or real(src, at))
    storm = "<function_calls>f(a=1)\ng(a=1, b=" + "{]" * 100_000
    lines = "<function_calls>I will call:\n" + "f(a=1) and more\n" * 12_000
    for text in (storm, lines):
        matched.clear()
        got = formats.get("olmo3").parse_lenient(text)
        assert sum(matched) <= pythonic_sentinels.MAX_SPLIT_CHARS
        assert got.calls[0] == ToolCall("f", {"a": 1})


def test_a_long_broken_upstream_is_recovered_once(monkeypatch):
    """Through the pipeline, the gate's reading of a long broken DeepSeek-V3 upstream and salvage's reading of the
    same text in the same format are one recovery: the reading is handed to salvage."""
    fmt = formats.get("deepseek_v3")
    recovered: list[int] = []
    real = type(fmt).recover
    monkeypatch.setattr(type(fmt), "recover",
                        lambda self, text, out: recovered.append(len(text)) or real(self, text, out))
    call = fmt.render([ToolCall("get_weather", {"city": "x" * 5000})])
    broken = call[: len(call) - 12]  # its closing tokens lost
    request = {"tools": [{"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}}}], "upstream": broken, "format": "deepseek_v3"}
    job = prepare(request, None)
    assert [c.name for c in job.upstream.calls] == ["get_weather"]
    assert len(recovered) == 1


def test_pythonic_recovery_bounds_its_ast_work(monkeypatch):
    """Recovery of a broken pythonic list hands ast at most its share of the repair budget (AST_COST_PER_CHAR per
    character), reads at most MAX_RECOVER_CHARS characters item by item and MAX_RECOVERED_SEGMENTS items."""
    handed: list[int] = []
    real = pythonic.parse_quietly

    def counting(src):
        handed.append(len(src))
        return real(src)

    monkeypatch.setattr(pythonic, "parse_quietly", counting)
    monkeypatch.setattr(pythonic_sentinels, "parse_quietly", counting)
    fmt = formats.get("toolace")
    texts = [
        "<function_list>[" + "f(a=(1, 'x'), b=[" * 2000,
        "<function_list>[" + ", ".join(f"g{i}(x={{'k': ({i}, 'v')}})" for i in range(3000)) + "</function_list>",
        "[" + "f(a='" * 20_000,
        "<function_list>[" + "'" * 150_000 + "]</function_list>",
    ]
    budget_chars = (jsonfix.REPAIR_TOTAL_COST + jsonfix.REPAIR_REGION_COST) // pythonic_sentinels.AST_COST_PER_CHAR
    for text in texts:
        handed.clear()
        got = fmt.parse_lenient(text)
        _assert_lenient(got)
        assert sum(handed) <= budget_chars + 2 * pythonic.MAX_AST_CHARS, (text[:40], sum(handed))
        assert len(got.calls) <= max(pythonic_sentinels.MAX_RECOVERED_SEGMENTS, jsonfix.MAX_RECOVERED_ITEMS)


def test_deep_values_never_reach_recursion_limits():
    """Nesting just under Python's recursion limit (which the C decoder can build) is refused by the strict parse
    and dropped by the lenient one, so the gate, repair, the reward and a JSON result never meet it; nesting within
    MAX_ARGUMENT_DEPTH is read."""
    limit = formats.MAX_ARGUMENT_DEPTH
    ok = "[" * (limit - 2) + "]" * (limit - 2)
    # just under the limit from where this test stands (a pytest-xdist worker's stack is some 60 frames deeper)
    n = sys.getrecursionlimit() - len(inspect.stack(0)) - 30
    deep = "[" * n + "]" * n
    for name in ("hermes", "xlam", "nestful", "anthropic", "apibank"):
        fmt = formats.get(name)
        call = fmt.render([ToolCall("f", {"a": 1, "b": 731})]).replace("731", "{slot}")
        assert fmt.parse_strict(call.replace("{slot}", ok))[0].arguments["b"]
        with pytest.raises(formats.FormatError, match="nest deeper"):
            fmt.parse_strict(call.replace("{slot}", deep))
        got = fmt.parse_lenient(call.replace("{slot}", deep))
        assert [c.arguments for c in got.calls] == [{"a": 1}] and any(p.code == "bad_argument" for p in got.problems)
        res = Refiner().refine({"tools": TOOLS, "upstream": call.replace("{slot}", deep), "format": name})
        json.dumps(res)
        gt = make_ground_truth(name, [ToolCall("f", {"a": 1})])
        assert tuple(compute_score("x", call.replace("{slot}", deep), gt)) == RESULT_KEYS


def test_calls_and_values_of_any_depth_or_size():
    """The call model, the gate and tier 1 on values no parser builds (5,000 levels, 10**5000, inf, 200 KB names):
    total, and bounded by their counts."""
    for kind, calls in hostile_calls(BIG):
        for c in calls:
            assert isinstance(canonical_json(dict(c.arguments)), str)
            assert c == ToolCall(c.name, dict(c.arguments), c.outputs, c.step) and hash(c) == hash(c)
            assert repr(c).startswith("ToolCall(")
        for fmt in ALL:
            diags = check_calls(calls, SPECS, fmt=fmt)
            assert len([d for d in diags if d.code != "unchecked"]) <= MAX_CHECKED_VALUES + len(calls) + 8, kind
            json.dumps([d.to_dict() for d in diags])
            fixed, actions = repair_calls(calls, SPECS, fmt=fmt)
            assert len(fixed) == len(calls)
            json.dumps([a.to_dict() for a in actions])
    deep: object = 1
    for _ in range(5000):
        deep = {"a": deep}
    assert canonical_json(deep) == '{"a":' * 5000 + "1" + "}" * 5000
    assert canonical_json(10**5000).startswith("0x") and canonical_json([10**5000]) != canonical_json([10**4999])
    assert len(preview(deep)) <= 60 and len(preview(10**5000)) <= 60


def test_name_similarity_work_is_counted(monkeypatch):
    """Snapping names compares at most MAX_NAME_COMPARISONS pairs per call list, however many calls and tools."""
    from refiner import repair

    calls_made = [0]
    real = repair.fuzz.ratio

    def counting(a, b, *k, **kw):
        calls_made[0] += 1
        return real(a, b, *k, **kw)

    monkeypatch.setattr(repair.fuzz, "ratio", counting)
    tools = {"book_table": SPECS["book_table"], **{f"q{i}x{i}z": SPECS["f"] for i in range(299)}}
    calls = [ToolCall(f"book_tabel{i}", {f"p{j}": j for j in range(80)}) for i in range(200)]  # (each name once)
    fixed, actions = repair_calls(calls, tools)
    assert calls_made[0] <= MAX_NAME_COMPARISONS
    snapped = [a.call for a in actions if a.code == "snap_tool"]
    assert snapped and len(snapped) <= MAX_NAME_COMPARISONS // len(tools) and len(fixed) == len(calls)
    # a name written again is not compared again: every call of it snaps, past the bound
    calls_made[0] = 0
    fixed, actions = repair_calls([ToolCall("book_tabel", {}) for _ in range(200)], tools)
    assert calls_made[0] == len(tools) and {c.name for c in fixed} == {"book_table"}


def test_a_repeated_misspelling_is_compared_once_per_call_list(monkeypatch):
    """A long call list that repeats a parameter misspelling compares its names once (the rename settled for the
    first call is the rename of every call written alike), so every call is repaired, past the comparisons' bound."""
    from refiner import repair

    compared = [0]
    real = repair.fuzz.ratio
    monkeypatch.setattr(repair.fuzz, "ratio", lambda a, b, *k, **kw: compared.__setitem__(0, compared[0] + 1)
                        or real(a, b, *k, **kw))
    calls = [ToolCall("book_table", {"restaurant": "x", "peple": 2}) for _ in range(MAX_NAME_COMPARISONS)]
    fixed, actions = repair_calls(calls, SPECS)
    assert all("people" in c.arguments and "peple" not in c.arguments for c in fixed)
    assert sum(a.code == "snap_param" for a in actions) == len(calls)
    assert compared[0] <= len(SPECS["book_table"].params)


def test_names_are_not_listed_per_call_once_the_comparisons_are_spent(monkeypatch):
    """Past its comparisons, a long call list to unknown names neither snaps nor lists the offered names per call (a
    tool list of n names once per call is n x calls work): the snaps are tried for the first calls only."""
    from refiner import repair

    tried = []
    real = repair.snap
    monkeypatch.setattr(repair, "snap", lambda name, candidates, *a, **k: tried.append(name) or real(name, candidates,
                                                                                                    *a, **k))
    tools = {f"tool_{i}": SPECS["f"] for i in range(1000)}
    calls = [ToolCall(f"other_{i}", {"a": i}) for i in range(2000)]
    fixed, _ = repair_calls(calls, tools)
    assert len(fixed) == len(calls)
    assert 0 < len(tried) <= MAX_NAME_COMPARISONS // len(tools)
    tried.clear()
    repair_calls(calls, tools, fmt="order")  # (a format that writes names only snaps names alone)
    assert len(tried) <= MAX_NAME_COMPARISONS // len(tools)


@pytest.mark.parametrize("name", ALL)
def test_gate_tier1_and_reward_on_hostile_texts(name):
    fmt = formats.get(name)
    gold = [c for c in fmt.parse_strict(fmt.example)]
    gt = make_ground_truth(name, gold)
    for kind, text in _texts(fmt, SIZE):
        report = check_text(text, name, SPECS)
        json.dumps([d.to_dict() for d in report.diagnostics])
        t1 = repair_text(text, name, SPECS)
        assert isinstance(t1.text, str)
        r = compute_score("fuzz", text, gt, {"upstream": text})
        assert tuple(r) == RESULT_KEYS and 0.0 <= r["score"] <= 1.0, kind


def test_pipeline_on_hostile_texts_and_requests():
    """Refiner.refine raises only RequestError (and only for requests it cannot read); refine_batch with
    errors="result" never raises, and every result is JSON."""
    refiner = Refiner()
    rng = random.Random(5)
    texts = [t for name in ALL for _, t in _texts(formats.get(name), SIZE)]
    for text in rng.sample(texts, 120) + [PAREN_KEY]:
        for req in ({"tools": TOOLS, "upstream": text}, {"tools": TOOLS, "upstream": text, "format": rng.choice(ALL)},
                    {"tools": TOOLS, "upstream": text, "finish_reason": "length"}):
            json.dumps(refiner.refine(req))
    bad = [None, 1, [], {"upstream": 1}, {"upstream": "x", "format": "nope"}, {"upstream": "x", "finish_reason": 3},
           {"upstream": "x", "tools": "not tools {"}, {"upstream": "x", "value_style": "loud"}, {"upstream": "x" * BIG}]
    results = refiner.refine_batch(bad, errors="result")
    assert [r["stage"] for r in results][:-1] == ["error"] * (len(bad) - 1)
    json.dumps(results)
    for req in bad[:-1]:
        with pytest.raises(RequestError):
            refiner.refine(req)


def test_an_internal_failure_is_one_requests_error_result(monkeypatch):
    from refiner import pipeline

    def broken(*a, **k):
        raise KeyError("a bug")

    monkeypatch.setattr(pipeline, "check_reading", broken)
    out = Refiner().refine_batch([{"upstream": "x"}, {"upstream": 2}], errors="result")
    assert [r["stage"] for r in out] == ["error", "error"]
    assert "internal error: KeyError" in out[0]["error"]
    with pytest.raises(KeyError):
        Refiner().refine({"upstream": "x"})


def test_pythonic_scanning_is_linear(monkeypatch):
    """The lenient quote reading (a quote ends a string only before what may follow a value) finds the quotes that
    may end strings by one pass over the text per quote kind, not one pass per string (quadratic on a storm of
    100,000 strings)."""
    passes: list[str] = []

    class Counting:
        def __init__(self, pattern):
            self.pattern = pattern

        def finditer(self, src):
            passes.append(self.pattern.pattern)
            return self.pattern.finditer(src)

    monkeypatch.setattr(pythonic_scan, "CLOSING_QUOTE", Counting(pythonic_scan.CLOSING_QUOTE))
    for src in ('{"' * 50_000, "'" * 100_000, "f(a='x', b=\"y\"), " * 10_000):
        passes.clear()
        pythonic_scan.split_top_level(src)
        pythonic_scan.matching_paren(src, 0, lenient_quotes=True)
        assert len(passes) <= 2
    assert pythonic_scan.split_top_level("a='x', b='it's', c=\"q\"") == ["a='x'", " b='it's'", ' c="q"']
    assert pythonic_scan.string_end("'a'b', c", 0, lenient_quotes=True) == 5
    assert pythonic_scan.string_end("'a'b', c", 0) == 3


BRACE_ROWS = [f for f in formats.by_rank() if isinstance(f, brace_kv.BraceKV)]


@pytest.mark.parametrize("name", [f.name for f in BRACE_ROWS])
def test_brace_kv_plain_step_stays_inside_its_call(monkeypatch, name):
    """The reader's plain step (a member or list element in one match) never reads over a call token, whichever row
    wrote the text (a Gemma 4 answer read by FunctionGemma, whose tokens it does not hold, included)."""
    fmt = formats.get(name)
    taken: list[str] = []

    class Recording:
        def __init__(self, pattern):
            self.pattern = pattern

        def match(self, text, pos):
            m = self.pattern.match(text, pos)
            if m is not None:
                taken.append(m.group())
            return m

    patterns = fmt.patterns
    monkeypatch.setitem(fmt.__dict__, "patterns", (*patterns[:4], *map(Recording, patterns[4:])))
    tokens = {t for row in BRACE_ROWS for t in (row.spelling.call_open, row.spelling.call_close)}
    for row in BRACE_ROWS:
        for kind, text in family_texts(row, BIG):
            for read in (fmt.parse_lenient, fmt.parse_strict):
                try:
                    read(text)
                except formats.FormatError:
                    pass
    assert taken and not [t for t in taken if any(tok in t for tok in tokens)]


@pytest.mark.parametrize("name", ["gemma4", "minimax_m3", "hermes", "llama4_pythonic"])
def test_argument_depth_boundary(name):
    """Arguments nesting MAX_ARGUMENT_DEPTH levels are read strictly, one level more is refused, by a reader that
    bounds depth itself (gemma4) as by those that do not (minimax_m3, hermes, llama4_pythonic)."""
    limit, fmt = formats.MAX_ARGUMENT_DEPTH, formats.get(name)
    for depth, wrap in itertools.product((limit - 1, limit, limit + 1), (lambda v: [v], lambda v: {"k": v})):
        value: object = wrap(1)
        for _ in range(depth - 2):
            value = wrap(value)
        text = fmt.render([ToolCall("f", {"a": value})])
        if depth <= limit:
            assert value_depth(fmt.parse_strict(text)[0].arguments, limit) == depth
        else:
            with pytest.raises(formats.FormatError, match="nest deeper"):
                fmt.parse_strict(text)
