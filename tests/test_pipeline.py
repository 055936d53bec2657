"""Stage logic of the refine pipeline with a scripted engine: bypass, never-worse guard, best of N, batching."""

from __future__ import annotations

import json

import pytest

from refiner.pipeline import Refiner, RequestError, error_result
from refiner.prompt import format_hint

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city", "days"],
            },
        },
    }
]


def tc(name: str, **args) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


GOOD = tc("get_weather", city="Paris", days=3)
MISSING = tc("get_weather", city="Paris")  # fails the gate; tier 1 cannot invent days


class ScriptedEngine:
    """Returns scripted generations in order; records every chat call."""

    def __init__(self, *scripts: list[str]) -> None:
        self.scripts = list(scripts)
        self.calls: list[dict] = []

    def chat(self, conversations, *, n=1, temperature=0.0, max_tokens=1024, enable_thinking=None, seed=None):
        self.calls.append({"conversations": conversations, "n": n, "thinking": enable_thinking, "t": temperature})
        out = []
        for _ in conversations:
            script = self.scripts.pop(0)
            assert len(script) == n
            out.append(script)
        return out


def req(upstream: str, **kw) -> dict:
    return {"tools": TOOLS, "query": "Weather in Paris for 3 days?", "upstream": upstream, **kw}


def test_tier1_only_results_are_json_and_labelled():
    r = Refiner()
    res = r.refine_batch([req(GOOD), req(GOOD.replace("get_weather", "get_wether")), req(MISSING)])
    assert [x["stage"] for x in res] == ["unchanged", "repaired", "unchanged"]
    assert [x["changed"] for x in res] == [False, True, False]
    assert res[0]["refined"] == GOOD and res[0]["diagnostics"] == []
    assert res[1]["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]
    assert res[1]["actions"][0]["code"] == "snap_tool"
    assert res[2]["diagnostics"][0]["code"] == "missing_required"
    json.dumps(res)


def test_diagnostics_and_actions_are_findings_of_one_shape():
    """The gate's findings and tier 1's repairs are one record, written alike; a repair's severity is "repair"."""
    res = Refiner().refine(req(tc("get_wether", city="Paris")))
    shape = ["code", "message", "call", "tool", "param", "severity"]
    assert res["upstream_diagnostics"] and res["actions"]
    assert all(list(d) == shape for d in res["diagnostics"] + res["upstream_diagnostics"])
    assert all(list(a) == shape and a["severity"] == "repair" for a in res["actions"])
    assert res["actions"][0] == {"code": "snap_tool", "message": "tool 'get_wether' -> 'get_weather'", "call": 0,
                                 "tool": "get_weather", "param": None, "severity": "repair"}


def test_bypass_skips_the_model_when_the_gate_passes():
    eng = ScriptedEngine([tc("get_weather", city="Paris", days=3)])
    res = Refiner(eng).refine_batch([req(GOOD), req(GOOD.replace("get_weather", "get_wether")), req(MISSING)])
    assert len(eng.calls) == 1 and len(eng.calls[0]["conversations"]) == 1  # only MISSING went to the model
    assert [x["stage"] for x in res] == ["unchanged", "repaired", "model"]
    assert res[2]["refined"].strip() == GOOD and res[2]["changed"]


def test_without_bypass_every_request_goes_to_the_model_in_one_batch():
    eng = ScriptedEngine(["<think>fine</think>" + GOOD], [GOOD])
    res = Refiner(eng, bypass=False, thinking=True).refine_batch([req(GOOD), req(MISSING)])
    assert len(eng.calls) == 1 and eng.calls[0]["thinking"] is True
    assert [x["stage"] for x in res] == ["unchanged", "model"]  # the model kept the first one as it was
    assert res[0]["refined"] == GOOD


def test_guard_falls_back_when_the_model_breaks_a_passing_call():
    eng = ScriptedEngine(["<think>x</think>" + tc("get_weather", city="Paris")])
    res = Refiner(eng, bypass=False).refine(req(GOOD))
    assert res["stage"] == "fallback" and res["refined"] == GOOD and not res["changed"]
    assert "missing_required" in res["reason"]


def test_guard_keeps_tier1_when_the_model_answer_is_unreadable():
    eng = ScriptedEngine(["I think the call is fine."])
    res = Refiner(eng, bypass=False).refine(req(GOOD.replace("get_weather", "get_wether")))
    assert res["stage"] == "fallback" and "get_weather" in res["refined"] and res["diagnostics"] == []


def test_model_output_is_tier1_repaired_too():
    broken = '<tool_call>{"name": "get_wether", "arguments": {"city": "Paris", "days": "3"}'  # tag, tool name, type
    eng = ScriptedEngine([broken])
    res = Refiner(eng).refine(req(MISSING))
    assert res["stage"] == "model"
    assert res["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]


def test_soft_findings_are_left_to_the_model_unless_the_spec_is_trusted():
    """A complete call with a number written as text and an undeclared parameter: tier 1 does not touch it (the spec
    may be loose), the gate still reports it, so it goes to the model; trust_spec=True repairs it without one."""
    soft = tc("get_weather", city="Paris", days="3", lang="fr")
    res = Refiner().refine(req(soft))
    assert res["stage"] == "unchanged" and res["refined"] == soft and not res["changed"]
    assert {d["code"] for d in res["diagnostics"]} == {"type", "unknown_param"}
    eng = ScriptedEngine([GOOD])
    assert Refiner(eng).refine(req(soft))["stage"] == "model" and len(eng.calls) == 1
    res = Refiner(trust_spec=True).refine(req(soft))
    assert res["stage"] == "repaired" and res["calls"][0]["arguments"] == {"city": "Paris", "days": 3}
    assert {a["code"] for a in res["actions"]} == {"coerce", "drop_param"}


def test_request_format_hint_replaces_the_default_sentence():
    hint = "Output only <tool_call> blocks; write every number as a quoted string."
    eng = ScriptedEngine([GOOD], [GOOD], [GOOD])
    r = Refiner(eng)
    r.refine(req(MISSING, format_hint=hint))
    r.refine(req(MISSING))
    r.refine(req(MISSING, format_hint=""))
    users = [c["conversations"][0][1]["content"] for c in eng.calls]
    assert users[0].rstrip().endswith(hint) and format_hint("hermes") not in users[0]
    assert users[1].rstrip().endswith(format_hint("hermes"))
    assert format_hint("hermes") not in users[2] and users[2].rstrip().endswith("only the corrected tool calls.")
    with pytest.raises(RequestError, match="'format_hint' must be a string"):
        Refiner().refine(req(GOOD, format_hint=["x"]))


def test_default_hint_names_the_output_format():
    eng = ScriptedEngine([GOOD])
    Refiner(eng, fmt="glaive").refine(req(MISSING))
    assert format_hint("glaive") in eng.calls[0]["conversations"][0][1]["content"]


def test_best_of_n_majority_among_gate_passing_samples():
    a = tc("get_weather", city="Paris", days=3)
    b = tc("get_weather", city="Paris", days=4)
    bad = tc("get_weather", city="Paris")
    eng = ScriptedEngine([bad, b, a, bad, a])
    res = Refiner(eng, n=5).refine(req(MISSING))
    assert eng.calls[0]["n"] == 5 and eng.calls[0]["t"] > 0
    assert res["stage"] == "model" and res["calls"][0]["arguments"]["days"] == 3


def test_best_of_n_tie_goes_to_the_earliest_passing_sample():
    a = tc("get_weather", city="Paris", days=3)
    b = tc("get_weather", city="Paris", days=4)
    res = Refiner(ScriptedEngine([b, a]), n=2).refine(req(MISSING))
    assert res["calls"][0]["arguments"]["days"] == 4


def test_when_nothing_passes_fewest_errors_wins():
    worse = tc("get_weather", days="x")  # two errors: city missing, days not an integer
    better = tc("get_weather", city="Paris", days="three")  # one error
    res = Refiner(ScriptedEngine([worse, better]), n=2).refine(req(tc("get_weather")))
    assert res["stage"] == "model" and res["calls"][0]["name"] == "get_weather"


def test_upstream_reasoning_goes_to_its_own_prompt_block():
    eng = ScriptedEngine([GOOD])
    Refiner(eng).refine(req("<think>user wants 3 days</think>" + MISSING))
    user = eng.calls[0]["conversations"][0][1]["content"]
    assert "user wants 3 days" in user and "hermes" in user


def test_bad_requests_raise_or_become_error_results():
    with pytest.raises(RequestError, match="request 1: field 'upstream' is missing"):
        Refiner().refine_batch([req(GOOD), {"tools": TOOLS}])
    with pytest.raises(RequestError, match="request 0: field 'format': unknown wire format 'nope'; known: "):
        Refiner().refine(req(GOOD, format="nope"))
    res = Refiner().refine_batch([req(GOOD), {"tools": TOOLS}, "text"], errors="result")
    assert [x["stage"] for x in res] == ["unchanged", "error", "error"]
    assert "upstream" in res[1]["error"] and res[2]["input"] == "text"
    assert error_result({"upstream": "x"}, "bad", line=7)["line"] == 7


def test_apibank_instruction_from_evaluation_reaches_the_model():
    """The API-Bank benchmark's samples carry the paper's instruction (Appendix E.1.3) as the request's format_hint;
    it must be what the model reads, in place of the default format sentence."""
    from refiner.eval.apibank import ADJUSTMENT_HINT
    from refiner.eval.runner import make_benchmark

    try:
        sample = make_benchmark("apibank").load(3)[0]
    except FileNotFoundError as e:
        pytest.skip(str(e))
    request = sample.refine_request("<tool_call>{not a call")
    assert request["format_hint"] == ADJUSTMENT_HINT
    eng = ScriptedEngine([GOOD])
    Refiner(eng).refine(request)
    user = eng.calls[0]["conversations"][0][1]["content"]
    assert user.rstrip().endswith(ADJUSTMENT_HINT) and format_hint("apibank") not in user
