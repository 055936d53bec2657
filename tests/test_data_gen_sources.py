"""Sources: real NesTools, Glaive, ToolACE and xLAM records normalise; every record read is either kept or counted
under the true reason it was skipped (deliberate filters apart, with why); bad records name source, record and
field."""

from __future__ import annotations

import json

import pytest
from conftest import shared_path

from data_gen import sources
from data_gen.sources import BadRecord, SkipLog, SourceUnavailable, toolace
from data_gen.sources.nestools import steps, to_order
from refiner import formats
from refiner.calls import ToolCall


def test_nestools_real_records():
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
    assert log.counts[("toolace", toolace.SPACED_NAMES)] == 1
    assert log.policies[("toolace", toolace.SPACED_NAMES)] == toolace.NAME_POLICY
    assert log.counts[("toolace", "no tool list in the system prompt")] == 1
    assert log.read["toolace"] == 3 and log.kept["toolace"] == 1
    # a deliberate filter is counted even in strict mode; a defect raises
    strict = SkipLog(strict=True)
    assert len(sources.load("toolace", p, skips=strict, progress=False, limit=1)) == 1
    with pytest.raises(BadRecord, match="no tool list"):
        sources.load("toolace", p, skips=strict, progress=False)


def test_xlam_records_and_bad_fields(tmp_path):
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
    msg = r"source 'xlam'.*Hub is unreachable.*--source-path xlam=PATH.*local.yaml"
    with pytest.raises(SourceUnavailable, match=msg):
        sources.load("xlam", progress=False)


@pytest.mark.slow  # datasets.load_dataset looks for a cached copy first (about 20 s)
def test_offline_hub_source_without_cache_says_so(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(sources.base, "hub_reachable", lambda timeout=3.0: False)
    msg = r"source 'xlam'.*cannot reach.*no cached copy.*--source-path xlam=PATH.*local.yaml"
    with pytest.raises(SourceUnavailable, match=msg):
        sources.load("xlam", progress=False)


def test_missing_local_file_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        sources.read_local(tmp_path / "nope.jsonl")


# ---------------------------------------------------------------------------------------------------------------
# Real records: ToolACE (890 rows in its own layout), xLAM-60k (22 rows), raw Glaive (6 rows); ../shared/data


def _jsonl(*parts):
    return [json.loads(line) for line in shared_path(*parts).read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def toolace_real():
    recs = _jsonl("toolace_real", "data.jsonl")
    log = SkipLog()
    got = sources.load("toolace", shared_path("toolace_real"), skips=log, progress=False)
    return recs, {s.record_id: s for s in got}, log


def _why(rid, rec):
    try:
        sources.get("toolace").normalise(rid, rec)
    except BadRecord as e:
        return e
    return None


def test_toolace_real_every_record_is_kept_or_skipped_for_a_named_reason(toolace_real):
    recs, kept, log = toolace_real
    info = log.by_source()["toolace"]
    assert info["read"] == len(recs) == 890 and info["kept"] == len(kept)
    assert info["kept"] + info["skipped"] == len(recs)
    # no catch-all left: every skip says what is wrong with the record
    assert not [r for r in info["skipped_by_reason"] if r.startswith("calls not parseable")], info["skipped_by_reason"]
    assert all(s.calls and s.fmt == "toolace" for s in kept.values())


def test_toolace_real_calls_after_a_text_answer_are_kept_with_their_history(toolace_real):
    """Records whose first assistant turn answers in text and a later one calls: the call is the gold, every turn
    before it the dialogue (found here by scanning the raw turns, independently of the loader)."""
    recs, kept, _ = toolace_real
    later = []
    for i, rec in enumerate(recs):
        turns = rec["conversations"]
        asst = [k for k, t in enumerate(turns) if t["from"] == "assistant"]
        calls = [k for k in asst if turns[k]["value"].strip().startswith("[")]
        if calls and calls[0] != asst[0]:
            later.append((str(i), calls[0]))
    assert later, "the real sample has records whose call comes after a text answer"
    fmt = formats.get("toolace")
    n_kept = 0
    for rid, k in later:
        rec = recs[int(rid)]
        if rid not in kept:  # only a deliberate name filter may drop one
            assert _why(rid, rec).reason in (toolace.SPACED_NAMES, toolace.OTHER_NAMES)
            continue
        n_kept += 1
        s = kept[rid]
        turns = rec["conversations"]
        assert s.calls == fmt.parse_strict(f"<function_list>{turns[k]['value'].strip()}</function_list>")
        assert [m["content"] for m in s.query] == [t["value"] for t in turns[:k]]
        assert [m["role"] for m in s.query][:2] == ["user", "assistant"]
    assert n_kept >= 1


def test_toolace_real_non_json_tool_lists_get_their_true_reason(toolace_real):
    """Records without ToolACE's JSON tool list: an empty list, none at all, or the format-diversity layouts whose
    prompt defines a call syntax of its own. Their call-like answers indeed are not toolace calls."""
    recs, kept, log = toolace_real
    fmt = formats.get("toolace")
    layouts = 0
    for i, rec in enumerate(recs):
        system = rec["system"]
        if '[{"name": ' in system and "tool_name" not in system:  # a JSON tool list (English or Chinese prompt)
            continue
        assert str(i) not in kept
        why = _why(str(i), rec)
        if "tool_name" in system:
            layouts += 1
            assert why.reason.startswith("tools in a layout of the record's own"), (i, why.reason)
            for t in rec["conversations"]:
                if t["from"] == "assistant" and t["value"].lstrip()[:1] in "[{(<":
                    with pytest.raises(formats.FormatError):
                        fmt.parse_strict(f"<function_list>{t['value'].strip()}</function_list>")
        else:
            assert why.reason in ("empty tool list (nothing to call)", "no tool list in the system prompt"), why
    assert layouts > 0 and log.counts[("toolace", "no JSON tool list in the system prompt")] == 0


def test_toolace_real_name_filter_is_counted_and_explained(toolace_real):
    recs, _, log = toolace_real
    info = log.by_source()["toolace"]
    spaced = info["skipped_by_reason"][toolace.SPACED_NAMES]
    assert info["filters"][toolace.SPACED_NAMES] == toolace.NAME_POLICY
    # independently: records whose first call lists a name with a space before its '('
    import re

    first_call = re.compile(r"^\s*\[\s*[^\s(\[\],]+(?: +[^\s(\[\],]+)+\s*\(")
    n = sum(1 for rec in recs if any(t["from"] == "assistant" and first_call.match(t["value"])
                                     for t in rec["conversations"]))
    assert spaced >= n > 200
    text = log.describe("toolace")
    assert f"{spaced} (" in text and "filter: the paper's filter" in text


def test_call_names_reads_names_python_cannot_parse():
    assert toolace.call_names('[Get Weather(city="Oslo, (NO)"), f(a=[1, ")"])]') == ["Get Weather", "f"]
    assert toolace.call_names('[Discounted Cash Flow Model (DCF) Analysis(symbol="MSFT")]') == [
        "Discounted Cash Flow Model (DCF) Analysis"]
    assert toolace.call_names("[/eff-wordlist()]") == ["/eff-wordlist"]
    for text in ("plain text", "[f(a=1)", "[f(a=1)] trailing", "[f, g]", "[(x)]"):
        assert toolace.call_names(text) is None, text


def test_xlam_real_records_all_load():
    recs = _jsonl("xlam_real", "data.jsonl")
    log = SkipLog(strict=True)
    got = sources.load("xlam", shared_path("xlam_real"), skips=log, progress=False)
    assert len(got) == len(recs) == log.read["xlam"] == log.kept["xlam"] == 22
    for s, rec in zip(got, recs):
        assert s.record_id == str(rec["id"])
        assert [(c.name, dict(c.arguments)) for c in s.calls] == [
            (a["name"], a["arguments"]) for a in json.loads(rec["answers"])]


def test_glaive_raw_history_has_no_end_of_text_marker():
    recs = _jsonl("glaive_raw", "data.jsonl")
    log = SkipLog()
    got = sources.load("glaive", shared_path("glaive_raw"), skips=log, progress=False)
    assert log.read["glaive"] == len(recs) and len(got) + log.total("glaive") == len(recs)
    assert any("<|endoftext|>" in r["chat"] for r in recs)
    history = [m for s in got for m in s.query]
    assert any(m["role"] == "assistant" for m in history), "the real rows have text answers before the call"
    for m in history:
        assert "<|endoftext|>" not in m["content"] and m["content"] == m["content"].strip()
        assert m["content"], "a turn kept its text"
    # the assistant's words are kept as they were, only the marker is gone
    chats = "\n".join(r["chat"] for r in recs)
    for m in history:
        if m["role"] == "assistant":
            assert m["content"] + " <|endoftext|>" in chats
