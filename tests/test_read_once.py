"""One ``refine`` reads a request's upstream once: one detection, at most one strict read of it in each format (the
format it is read in exactly once: detection's reading, or the requested format's, is the gate's), at most one
lenient read in the format it is read in (salvage takes that reading), and at most one read of tier 1's output, none
where its calls read back as themselves (:func:`refiner.repair.reads_back`). So does the proxy's worker for calls left
in an answer's content: it detects the text and the pipeline reads it by that detection
(:class:`refiner.formats.reading.Detected`).

Counted by wrapping the registry's entry points (each format's ``parse_strict`` and ``parse_lenient``, detection),
not by counters in the library."""

from __future__ import annotations

import json
import sys
from collections import Counter

import httpx
import pytest
from fake_upstream import WEATHER_QUERY, create_fake_upstream, serve_in_thread

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import detect as detect_module
from refiner.formats import reading as reading_module
from refiner.pipeline import Refiner
from refiner.proxy import create_app, work
from refiner.repair import reads_back

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}]

CASES = {
    "valid": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>',
    "needs repair": '<tool_call>\n{"name": "get_wether", "arguments": {"city": "Paris", "days": "3"}}\n</tool_call>',
    "broken json": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}\n</tool_call>',
    "xml": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
    "in prose": 'I will call it: {"name": "get_weather", "arguments": {"city": "Paris"}} now.',
    "no call": "I cannot call a tool for that.",
    "cut": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
    "long broken": "<tool_call>\n" + '{"name": "get_weather", "arguments": {"city": "' + "x" * 6000 + '"}\n</tool_call>',
}


@pytest.fixture
def reads(monkeypatch):
    """``(counts, texts)``: set ``texts["upstream"]`` and ``texts["output"]`` before a refine; ``counts`` then
    holds ``("strict"|"lenient", "upstream"|"output"|"other", format)`` and ``("detect", which)``."""
    counts: Counter = Counter()
    texts: dict[str, str | None] = {"upstream": None, "output": None}

    def which(text):
        return "upstream" if text == texts["upstream"] else "output" if text == texts["output"] else "other"

    for fmt in formats.all_formats():
        def strict(text, _orig=fmt.parse_strict, _name=fmt.name):
            counts["strict", which(text), _name] += 1
            return _orig(text)

        def lenient(text, *a, _orig=fmt.parse_lenient, _name=fmt.name, **k):
            counts["lenient", which(text), _name] += 1
            return _orig(text, *a, **k)

        monkeypatch.setattr(fmt, "parse_strict", strict)
        monkeypatch.setattr(fmt, "parse_lenient", lenient)
    original = detect_module.detect_with_calls

    def detect(text, *a, **k):
        counts["detect", which(text)] += 1
        return original(text, *a, **k)

    for module in [m for name, m in sys.modules.items() if name.split(".")[0] == "refiner"]:
        if getattr(module, "detect_with_calls", None) is original:  # every module that imported it by name
            monkeypatch.setattr(module, "detect_with_calls", detect)
    return counts, texts


def read_once(counts: Counter) -> None:
    """One detection of the upstream, at most one strict read of it per format and one lenient read in all, at most
    one strict read of tier 1's output, no detection of it."""
    assert counts["detect", "upstream"] == 1, counts
    reads = [(*key, n) for key, n in counts.items() if len(key) == 3]
    strict = {name: n for kind, text, name, n in reads if kind == "strict" and text == "upstream"}
    assert all(n == 1 for n in strict.values()), strict
    lenient = {name: n for kind, text, name, n in reads if kind == "lenient" and text == "upstream"}
    assert sum(lenient.values()) <= 1, lenient
    assert sum(n for kind, text, _, n in reads if kind == "strict" and text == "output") <= 1, counts
    assert counts["detect", "output"] == 0


@pytest.mark.parametrize("fmt", [None, "hermes"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_one_refine_reads_its_upstream_once(reads, case, fmt):
    counts, texts = reads
    request = {"tools": TOOLS, "query": "", "upstream": CASES[case], "format": fmt}
    texts["upstream"] = CASES[case]
    refined = Refiner().refine(request)["refined"]
    texts["output"] = refined if refined != CASES[case] else None
    counts.clear()
    result = Refiner().refine(request)
    assert result["refined"] == refined
    read_in = result["format"] if result["stage"] == "unchanged" else None
    detections = counts["detect", "upstream"]
    assert detections == (1 if fmt is None else detections) and detections <= 1, counts
    reads = [(*key, n) for key, n in counts.items() if len(key) == 3]
    strict = {name: n for kind, text, name, n in reads if kind == "strict" and text == "upstream"}
    assert all(n == 1 for n in strict.values()), strict  # no format reads the upstream strictly twice
    lenient = {name: n for kind, text, name, n in reads if kind == "lenient" and text == "upstream"}
    assert sum(lenient.values()) <= 1, lenient  # salvage takes the format's own lenient reading
    for name in lenient:  # a lenient read is given the strict reading already made (it does not parse again)
        assert strict.get(name) == 1
    if read_in is not None:
        assert strict.get(read_in) == 1
    output = sum(n for kind, text, _, n in reads if kind == "strict" and text == "output")
    calls = [ToolCall.from_dict(c) for c in result["calls"]]
    assert output <= (not reads_back(calls, formats.get(result["format"]))), counts  # tier 1's output: read back
    # only where its calls would not read back as themselves, once
    assert counts["detect", "output"] == 0


def test_the_read_format_is_read_strictly_exactly_once(reads):
    counts, texts = reads
    text = CASES["broken json"]
    texts["upstream"] = text
    Refiner().refine({"tools": TOOLS, "query": "", "upstream": text})
    assert counts["strict", "upstream", "hermes"] == 1
    assert counts["lenient", "upstream", "hermes"] == 1
    assert counts["detect", "upstream"] == 1


def test_one_refine_reads_its_tools_once(monkeypatch):
    """The request's tool list is read once (one catalog; a called tool's spec read once) and its parameters taken
    once for every reader: the upstream's reading, tier 1's output and each of the model's answers are handed them."""
    from refiner import pipeline
    from refiner.specs import catalog

    built, specs, offered = [], Counter(), []
    real_catalog, real_load, real_params = pipeline.tool_catalog, catalog.ToolCatalog._load, pipeline.params_by_tool
    monkeypatch.setattr(pipeline, "tool_catalog", lambda raw: built.append(raw) or real_catalog(raw))
    monkeypatch.setattr(catalog.ToolCatalog, "_load", lambda self, i: specs.update([i]) or real_load(self, i))
    for module in (pipeline, reading_module):
        monkeypatch.setattr(module, "params_by_tool", lambda tools: offered.append(tools) or real_params(tools))

    class Engine:
        def chat(self, conversations, *, n=1, **_):
            return [[CASES["needs repair"]] * n for _ in conversations]

    result = Refiner(Engine(), n=3, bypass=False).refine({"tools": TOOLS, "upstream": CASES["needs repair"]})
    assert result["stage"] == "model" and result["calls"] == [{"name": "get_weather", "arguments": {
        "city": "Paris", "days": 3}}]
    assert len(built) == 1 and dict(specs) == {0: 1}
    assert len(offered) == 1  # one catalog's parameters, passed down


def test_format_errors_survive_a_trip_between_processes():
    """A reading holds the strict reader's error; the proxy's worker sends readings back pickled."""
    import pickle

    from refiner.formats.base import FormatError, RenderError

    for err in (FormatError("hermes", "invalid JSON", 7), FormatError("glm45", "no block"), RenderError("xlam", "x")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err) and vars(back) == vars(err)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_proxy_worker_reads_content_once(reads, case):
    """Calls left in an answer's content: the worker detects the text, and the pipeline reads it by that detection."""
    counts, texts = reads
    item = work.content_item(CASES[case], TOOLS, None)
    (outcome,) = work.tier1(Refiner(), [item])
    texts["upstream"] = CASES[case]
    refined = (outcome["result"] or {}).get("calls")
    counts.clear()
    (again,) = work.tier1(Refiner(), [item])
    assert (again["result"] or {}).get("calls") == refined
    read_once(counts)


@pytest.fixture(scope="module")
def upstream():
    with serve_in_thread(create_fake_upstream()) as url:
        yield url


UNTAGGED = {  # calls in content with no marker: the proxy's content split asks whether the region holds calls
    "valid list": '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]',
    "open list": '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}',
    "broken list": '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3,}}]',
    "pythonic": '[get_weather(city="Paris", days=3)]',
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("text", [CASES["valid"], CASES["broken json"], CASES["needs repair"], *UNTAGGED.values()],
                         ids=["valid", "broken json", "needs repair", *UNTAGGED])
def test_a_proxied_answer_is_read_once(upstream, reads, text, stream):
    """A whole or streamed answer through the proxy (its worker in threads of this process): the calls the upstream
    left in its content are detected once (a region check's detection is the read's) and read once."""
    counts, texts = reads
    texts["upstream"] = text
    body = {"model": "m", "messages": [{"role": "user", "content": WEATHER_QUERY}], "tools": TOOLS,
            "x_fake": {"content": "Let me look.\n" + text}, "chat_template_kwargs": {"enable_thinking": False}}
    with serve_in_thread(create_app(upstream + "/v1", refiner=Refiner(), workers=0)) as url:
        if stream:
            with httpx.stream("POST", url + "/v1/chat/completions", json={**body, "stream": True}, timeout=60) as r:
                chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
            names = [t["function"]["name"] for c in chunks if c.get("choices")
                     for t in c["choices"][0]["delta"].get("tool_calls", []) if t["function"].get("name")]
        else:
            r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
            names = [t["function"]["name"] for t in r.json()["choices"][0]["message"]["tool_calls"]]
    assert names == ["get_weather"]
    read_once(counts)


@pytest.mark.parametrize("text", [*CASES.values(), *UNTAGGED.values()], ids=[*CASES, *UNTAGGED])
def test_a_text_read_by_its_detection_reads_as_with_no_format_asked(text):
    """A text read on from its detection (the worker's read) is read as with no format asked for."""
    from refiner.formats.reading import detect_upstream, read_upstream
    from refiner.pipeline import load_request_tools

    found = detect_upstream(text)
    if found.fmt is None:
        return
    tools = load_request_tools({"tools": TOOLS})
    ours, theirs = read_upstream(found.text, None, tools, detected=found), read_upstream(text, None, tools)
    fields = ("text", "fmt", "out_fmt", "detected", "calls", "strict_ok", "strict_reason", "cut", "mended")
    assert {f: getattr(ours, f) for f in fields} == {f: getattr(theirs, f) for f in fields}
    assert (ours.salvaged is None) == (theirs.salvaged is None)


def test_prose_that_could_start_no_call_is_read_strictly_only(reads, monkeypatch):
    """A text with no marker, no bracket and no offered name after its reasoning: one strict read, no lenient read
    and no salvage (neither could find a call there)."""
    salvaged = []
    monkeypatch.setattr(reading_module, "salvage", lambda *a, **k: salvaged.append(a))
    counts, texts = reads
    text = "<think>Nothing to look up.</think>It is sunny, as far as I know."
    texts["upstream"] = text
    result = Refiner().refine({"tools": TOOLS, "upstream": text})
    assert [c for c in counts if c[0] == "lenient"] == [] and not salvaged
    assert counts["strict", "upstream", "hermes"] == 1
    assert [d["code"] for d in result["diagnostics"]] == ["format", "no_calls"]


@pytest.mark.parametrize("text", ["I will call get_weather now.", "Sure: {", "Sure [", "Sure (", "</tool_call>",
                                  ">>>get_time"])
def test_anything_that_could_start_a_call_is_read(text):
    from refiner.formats.base import marker_positions
    from refiner.formats.reading import could_hold_calls, read

    body = read(text)
    assert could_hold_calls(body, marker_positions(body), {"get_weather": {}})
    assert not could_hold_calls(read("It is sunny."), {}, {"get_weather": {}})


def test_prose_holding_a_string_cut_at_its_end_is_read_leniently():
    """The default format's lenient read reports a JSON string the text stops inside, so a text with a quote is not
    read strictly only."""
    result = Refiner().refine({"tools": TOOLS, "upstream": '"Paris, as the user'})
    assert "truncated" in [d["code"] for d in result["upstream_diagnostics"]]
