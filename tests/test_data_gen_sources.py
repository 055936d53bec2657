"""Sources: real NesTools and Glaive records normalise; ToolACE/xLAM records in their published shapes; bad
records are counted (or raised) with source, record and field named."""

from __future__ import annotations

import json

import pytest
from conftest import shared_path

from data_gen import sources
from data_gen.sources import BadRecord, SkipLog, SourceUnavailable
from data_gen.sources.nestools import steps, to_order
from refiner.calls import ToolCall


def _fmt_or_skip(name):
    try:
        sources.ensure_format(name)
    except SourceUnavailable:
        pytest.skip(f"wire format {name!r} not available yet")


def test_nestools_real_records():
    _fmt_or_skip("nestools")
    log = SkipLog()
    got = sources.load("nestools", shared_path("nestools", "test_data.jsonl"), skips=log, progress=False)
    assert len(got) + log.total("nestools") == 1000 and len(got) > 950
    s = got[0]
    assert s.fmt == "nestools" and "<nested function>" in s.system and s.calls[0].outputs
    assert all(isinstance(c, ToolCall) for c in s.calls)


def test_nestools_steps_follow_placeholders():
    calls = [ToolCall("scan", {"isbn": "1"}, ("API_call_0", "API_call_1")), ToolCall("locate", {"b": "API_call_0"},
             ("API_call_2",)), ToolCall("ar", {"a": "API_call_1", "l": "API_call_2"}, ("API_call_3",)),
             ToolCall("other", {"x": 1}, ("API_call_4",))]
    assert steps(calls) == [1, 2, 3, 1]
    s = sources.Sample("nestools", "0", "", "q", [], calls, "nestools")
    order = to_order(s)
    assert [(c.name, c.step) for c in order.calls] == [("scan", 1), ("other", 1), ("locate", 2), ("ar", 3)]


def test_glaive_sharegpt_subset_counts_every_skip():
    log = SkipLog()
    got = sources.load("glaive", shared_path("glaive_demo"), skips=log, progress=False, fmt="hermes")
    assert len(got) + log.total("glaive") == 300
    reasons = {r["reason"] for r in log.summary()}
    assert "no tools (a plain chat record)" in reasons
    s = got[0]
    assert s.system.startswith("You are a helpful assistant with access to the following functions")
    assert isinstance(s.query, list) and s.query[-1]["role"] == "user"


def test_glaive_raw_format():
    _fmt_or_skip("glaive")
    rec = {"system": 'SYSTEM: You are a helpful assistant with access to the following functions. Use them if '
                     'required -\n{\n "name": "generate_password",\n "parameters": {"type": "object", "properties": '
                     '{"length": {"type": "integer"}}, "required": ["length"]}\n}',
           "chat": "USER: I need a password of 12 characters.\n\n\nASSISTANT: <functioncall> {\"name\": "
                   "\"generate_password\", \"arguments\": '{\"length\": 12}'} <|endoftext|>\n\n\nFUNCTION RESPONSE: "
                   "{\"password\": \"x\"}\n\n\nASSISTANT: Here it is. <|endoftext|>"}
    s = sources.get("glaive").normalise("7", rec)
    assert s.calls == [ToolCall("generate_password", {"length": 12})]
    assert s.query == [{"role": "user", "content": "I need a password of 12 characters."}]


TOOLACE_SYSTEM = ("You are an expert in composing functions. Here is a list of functions in JSON format that you can "
                  'invoke:\n[{"name": "Get Weather", "description": "w", "parameters": {"type": "dict", "properties": '
                  '{"city": {"type": "string"}}, "required": ["city"]}}, {"name": "get_time", "parameters": {"type": '
                  '"dict", "properties": {"tz": {"type": "string"}}, "required": []}}]. Should you decide to return '
                  "the function call(s), put it in the format of [func1(params_name=params_value)]")


def test_toolace_records_and_paper_filter(tmp_path):
    _fmt_or_skip("toolace")
    recs = [
        {"system": TOOLACE_SYSTEM, "conversations": [{"from": "user", "value": "Time in UTC?"},
                                                     {"from": "assistant", "value": '[get_time(tz="UTC")]'}]},
        {"system": TOOLACE_SYSTEM, "conversations": [{"from": "user", "value": "Weather in Oslo?"},
                                                     {"from": "assistant", "value": '[Get Weather(city="Oslo")]'}]},
        {"system": "no tools here", "conversations": []},
    ]
    p = tmp_path / "toolace.json"
    p.write_text(json.dumps(recs))
    log = SkipLog()
    got = sources.load("toolace", p, skips=log, progress=False)
    assert [s.calls for s in got] == [[ToolCall("get_time", {"tz": "UTC"})]]
    assert log.counts[("toolace", "tool name with spaces (not parseable)")] == 1
    assert log.counts[("toolace", "no JSON tool list in the system prompt")] == 1


def test_xlam_records_and_bad_fields(tmp_path):
    _fmt_or_skip("xlam")
    tools = json.dumps([{"name": "live_giveaways_by_type", "description": "d",
                         "parameters": {"type": {"description": "t", "type": "str, optional", "default": "game"}}}])
    recs = [
        {"id": 1, "query": "Beta and game giveaways?", "tools": tools,
         "answers": json.dumps([{"name": "live_giveaways_by_type", "arguments": {"type": "beta"}},
                                {"name": "live_giveaways_by_type", "arguments": {"type": "game"}}])},
        {"id": 2, "query": "x", "tools": tools, "answers": "[{'name': broken"},
        {"id": 3, "query": "x", "tools": tools, "answers": json.dumps([{"name": "f", "arguments": "a=1"}])},
    ]
    p = tmp_path / "xlam.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs))
    log = SkipLog()
    got = sources.load("xlam", p, skips=log, progress=False)
    assert len(got) == 1 and len(got[0].calls) == 2 and "<func_call>" in got[0].system
    ex = {r["reason"]: r["examples"] for r in log.summary()}
    assert ex["not valid JSON"] == ["record 2, field 'answers'"]
    assert ex["expected an object, got str"] == ["record 3, field 'answers[0].arguments'"]
    with pytest.raises(BadRecord, match=r"xlam record 2: field 'answers': not valid JSON"):
        sources.load("xlam", p, skips=SkipLog(strict=True), progress=False)


def test_unreachable_hub_source_says_so(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(sources.base, "hub_reachable", lambda timeout=3.0: False)
    _fmt_or_skip("xlam")
    msg = r"source 'xlam'.*Hub is unreachable.*--source-path xlam=PATH.*local.yaml"
    with pytest.raises(SourceUnavailable, match=msg):
        sources.load("xlam", progress=False)


@pytest.mark.slow  # datasets.load_dataset looks for a cached copy first (about 20 s)
def test_offline_hub_source_without_cache_says_so(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sources.base, "hub_reachable", lambda timeout=3.0: False)
    _fmt_or_skip("xlam")
    with pytest.raises(SourceUnavailable, match=r"source 'xlam'.*could not load.*--source-path xlam=PATH.*local.yaml"):
        sources.load("xlam", progress=False)


def test_missing_local_file_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        sources.read_local(tmp_path / "nope.jsonl")
