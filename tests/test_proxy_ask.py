"""The questions a content split asks (:func:`refiner.proxy.work.answer`, one answerer for the proxy, its workers and
the vLLM plugin): a region is checked by reading it, not by a tier-1 refinement; early calls are read by tier 1 and
held back when the refiner model would take them."""

from __future__ import annotations

import pytest

from refiner.pipeline import Refiner
from refiner.proxy import work

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
BASE = {"tools": TOOLS, "names": ["get_weather"], "allowed": None, "model": False}


def test_a_region_is_checked_by_reading_it(monkeypatch) -> None:
    def no_tier1(*args, **kwargs):
        raise AssertionError("a region check ran tier 1")

    monkeypatch.setattr(work, "tier1", no_tier1)
    ref = Refiner(engine=None)

    def region(text: str) -> bool:
        read = work.answer(ref, {**BASE, "kind": "region", "text": text})
        assert read.text == text and (read.detected is not None) == read.calls  # a region of calls hands on its detection
        return read.calls

    assert region('[{"name": "get_weather", "arguments": {"city": "Paris"}}]') is True
    assert region('[{"name": "get_wether", "arguments": {"city": "Paris"}}]') is True  # a name tier 1 would snap
    assert region('[{"name": "delete_everything", "arguments": {}}]') is False  # no offered tool
    assert region("[1, 2, 3]") is False
    assert work.answer(ref, {**BASE, "allowed": ["hermes"], "kind": "region",
                             "text": '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'}).calls is False


@pytest.mark.parametrize("model,bypass,sent", [(False, False, True), (True, True, True), (True, False, False)])
def test_early_calls_wait_when_the_model_would_take_them(model, bypass, sent) -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    got = work.answer(Refiner(engine=None, bypass=bypass), {**BASE, "model": model, "kind": "calls", "text": text})
    assert got.calls == ([{"name": "get_weather", "arguments": {"city": "Paris"}}] if sent else None)
    assert got.text == text and got.outcome["result"]["stage"] == "unchanged"  # the read, for the answer's end
    assert ("job" in got.outcome) == (not sent)


def test_a_region_read_travels_between_processes() -> None:
    """A region's read goes from the worker that checked it to the one that reads the held text: pickled, without the
    format objects detection kept (where formats share a marker, the one it chose)."""
    import pickle

    text = '```\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris",}}\n</tool_call>\n```'
    read = work.answer(Refiner(engine=None), {**BASE, "kind": "region", "text": text})
    assert read.calls and read.detected.sniffed and read.detected.reading is not None
    back = pickle.loads(pickle.dumps(read))
    assert back.detected.sniffed == {} and back.detected.reading.calls == read.detected.reading.calls


@pytest.fixture
def catalogs(monkeypatch) -> list:
    """Every tool catalog built (a request's tools read), in order."""
    from refiner.specs.catalog import ToolCatalog

    built: list = []
    original = ToolCatalog.__init__

    def counted(self, *args, **kwargs):
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(ToolCatalog, "__init__", counted)
    return built


BROKEN_REGION = 'I will look it up.\n[{"name": "get_wether", "arguments": {"city": "Paris",}}]\n'


def test_the_vllm_plugin_reads_a_request_s_tools_once(catalogs) -> None:
    """A broken region is read with the request's tools to check it, and the held text is read again at the end:
    both reads take the one catalog."""
    from refiner.proxy.vllm_plugin import Reader  # (imported here: imported before vLLM, it would not register)

    reader = Reader(TOOLS, Refiner(engine=None))
    for i in range(0, len(BROKEN_REGION), 5):
        reader.feed(BROKEN_REGION[i : i + 5])
    _, calls = reader.end()
    assert calls == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert len(catalogs) == 1


def test_a_split_in_a_worker_reads_the_request_s_tools_once(catalogs) -> None:
    """Each broken region is read with the request's tools: one catalog for all of them."""
    other = '[{"name": "erase_disk", "arguments": {"disk": 1,}}]\n'  # broken, and names no offered tool
    text = "Two lists.\n" + other + BROKEN_REGION
    got = work.split(Refiner(engine=None), {**BASE, "text": text, "markers": []})
    assert got["released"] == "Two lists.\n" + other + "I will look it up.\n" and "get_wether" in got["held"]
    assert len(catalogs) == 1
