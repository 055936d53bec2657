"""Tool lists read as far as a request needs them (``refiner.specs.catalog``): names at once, a spec when first
asked for, catalogs of JSON texts kept (LRU, bounded) for the next request that offers the same list; and the
pipeline reading only what the request's calls need."""

from __future__ import annotations

import json
import pickle

import pytest

from refiner.pipeline import Refiner, RequestError, load_request_tools
from refiner.specs import SpecError, ToolCatalog, ToolList, load_tools, loads_keeping_tools, tool_catalog
from refiner.specs.catalog import CACHE


def tools(n: int, params: int = 3) -> list[dict]:
    return [{"type": "function", "function": {"name": f"tool_{i}", "description": f"tool {i}", "parameters": {
        "type": "object", "required": ["p0"], "properties": {f"p{j}": {"type": "integer"} for j in range(params)}}}}
        for i in range(n)]


def call(name: str, arguments: str | None = None, **args) -> str:
    return json.dumps([{"id": "c1", "type": "function", "function": {
        "name": name, "arguments": json.dumps(args) if arguments is None else arguments}}])


@pytest.fixture(autouse=True)
def empty_cache():
    CACHE.clear()
    yield
    CACHE.clear()


MIXED = [  # one tool of each dialect the catalog files by name without reading it
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {
        "x": {"type": "integer"}}}}},
    {"name": "b", "description": "jsonschema", "parameters": {"type": "object", "properties": {"y": {"type": "string"}},
                                                              "required": ["y"]}},
    {"name": "c", "parameters": {"q": {"type": "str, optional", "description": "xlam"}}},
    {"api_name": "d", "api_description": "nestools", "parameters": {"z": {"type": "int"}}, "required": ["z"]},
    {"name": "e", "input_schema": {"type": "object", "properties": {"w": {"type": "number"}}}},
]


@pytest.mark.parametrize("given", ["objects", "text"])
def test_a_catalog_reads_what_load_tools_reads_but_only_when_asked(given) -> None:
    source = MIXED if given == "objects" else json.dumps(MIXED)
    cat = tool_catalog(source)
    assert isinstance(cat, ToolCatalog) and list(cat) == ["a", "b", "c", "d", "e"] and cat.read == 0
    assert cat["b"] == {s.name: s for s in load_tools(MIXED)}["b"] and cat.read == 1
    assert {k: v for k, v in cat.items()} == {s.name: s for s in load_tools(MIXED)}  # every tool, same specs
    assert "zz" not in cat and cat.get("zz") is None and len(cat) == 5


def test_duplicate_names_keep_the_last_tool_and_nameless_tools_fail_at_once() -> None:
    dup = [*tools(2), {"type": "function", "function": {"name": "tool_0", "parameters": {"type": "object",
                                                                                        "properties": {}}}}]
    assert tool_catalog(dup)["tool_0"].params == {}
    with pytest.raises(SpecError):
        tool_catalog([{"type": "function", "function": {"description": "no name"}}])


def test_other_shapes_are_left_to_load_tools() -> None:
    assert tool_catalog({"tools": tools(1)}) is None and tool_catalog("You may call: get_weather(city)") is None
    assert tool_catalog('{"name": "x"}') is None and tool_catalog("[1, 2]") is None and tool_catalog("[]") is None


@pytest.mark.parametrize("items", [[1], ["get_weather"], [("a", "b")], [None], [[{"name": "a"}]]])
def test_a_list_holding_no_tool_object_is_left_to_load_tools_which_names_the_item(items) -> None:
    nameless = {"type": "function", "function": {"description": "no name"}}
    for listed in ([*tools(2), *items], [nameless, *items], [*items, nameless], tuple(items)):
        assert tool_catalog(listed) is None
        with pytest.raises(RequestError, match="a tool must be an object"):
            load_request_tools({"tools": listed})


def test_the_pipeline_reads_only_the_called_tools() -> None:
    text = json.dumps(tools(300))
    ref = Refiner()
    res = ref.refine({"tools": text, "upstream": call("tool_7", "{'p0': 3,}"), "format": "openai"})
    assert res["stage"] == "repaired" and res["calls"] == [{"name": "tool_7", "arguments": {"p0": 3}}]
    (cat,) = CACHE.entries.values()
    assert cat.read == 1
    res = ref.refine({"tools": text, "upstream": call("tol_9", p0=1), "format": "openai"})  # name repair
    assert res["calls"][0]["name"] == "tool_9" and cat.read == 2 and CACHE.hits == 1
    objects = tools(300)
    cat = tool_catalog(objects)
    res = ref.refine({"tools": cat, "upstream": call("tool_5", "{'p0': 1}"), "format": "openai"})
    assert res["calls"] == [{"name": "tool_5", "arguments": {"p0": 1}}] and cat.read == 1


def test_a_broken_called_tool_is_a_request_error_an_uncalled_one_is_not_read() -> None:
    broken = [*tools(2), {"type": "function", "function": {"name": "bad", "parameters": {"type": "object",
                                                                                       "properties": [1]}}}]
    with pytest.raises(SpecError):
        load_tools(broken)  # read whole, the list fails
    ref = Refiner()
    assert ref.refine({"tools": broken, "upstream": call("tool_1", p0=1), "format": "openai"})["stage"] == "unchanged"
    with pytest.raises(RequestError, match="field 'tools' could not be read as tool specs"):
        ref.refine({"tools": broken, "upstream": call("bad", p0=1), "format": "openai"})


def test_the_cache_is_keyed_by_the_whole_text_and_bounded(monkeypatch) -> None:
    a = json.dumps(tools(5))
    b = a.replace('"p2": {"type": "integer"}}}}}]', '"p2": {"type": "string"}}}}}]')  # the last tool differs
    assert a != b and len(a) == len(b) + 1
    assert tool_catalog(a)["tool_4"].params["p2"].type == "integer"
    assert tool_catalog(b)["tool_4"].params["p2"].type == "string"
    assert tool_catalog(a.encode().decode()) is tool_catalog(a)  # an equal text finds the same catalog
    long_a = json.dumps(tools(40))
    at = long_a.index('"name": "tool_20"')
    long_b = long_a[:at] + long_a[at:].replace('"p1": {"type": "integer"}', '"p1": {"type": "boolean"}', 1)
    assert len(long_a) == len(long_b) and long_a[:1000] == long_b[:1000] and long_a[-1000:] == long_b[-1000:]
    assert tool_catalog(long_a)["tool_20"].params["p1"].type == "integer"
    assert tool_catalog(long_b)["tool_20"].params["p1"].type == "boolean"  # same length and ends: still its own
    monkeypatch.setattr(CACHE, "max_lists", 3)
    texts = [json.dumps(tools(k + 1)) for k in range(5)]
    for t in texts:
        tool_catalog(t)
    tool_catalog(texts[2])  # used again: kept
    tool_catalog(json.dumps(tools(9)))
    assert CACHE.texts() == [texts[4], texts[2], json.dumps(tools(9))]
    monkeypatch.setattr(CACHE, "max_chars", len(texts[4]) + 10)
    CACHE.clear()
    tool_catalog(texts[4])
    assert tool_catalog(json.dumps(tools(20)))["tool_19"].name == "tool_19"  # longer than the cache: read, not kept
    assert CACHE.texts() == [texts[4]]
    tool_catalog(texts[3])  # the two do not fit together: the older goes
    assert CACHE.texts() == [texts[3]] and CACHE.chars == len(texts[3])


def test_a_request_body_keeps_its_tool_list_text_and_ships_it_as_text() -> None:
    body = '{"model": "m", "tools" : [ {"type": "function", "function": {"name": "f"}} ] , "n": 1}'
    parsed = loads_keeping_tools(body)
    assert parsed == json.loads(body) and isinstance(parsed["tools"], ToolList)
    assert parsed["tools"].text == '[ {"type": "function", "function": {"name": "f"}} ]'
    assert pickle.loads(pickle.dumps(parsed["tools"])) == parsed["tools"].text  # a worker gets the text
    assert json.loads(json.dumps(parsed)) == json.loads(body)
    for bad in ('{"tools": [1}', '{"a": 1,}', '{"a": 1} x', "[1]", "{}", '{"tools": {"a": 1}}'):
        try:
            expected = json.loads(bad)
        except ValueError:
            with pytest.raises(ValueError):
                loads_keeping_tools(bad)
        else:
            assert loads_keeping_tools(bad) == expected


def test_a_long_tool_list_read_before_is_found_in_place_not_parsed_again() -> None:
    from refiner.specs.catalog import MIN_PARSED_CHARS, PARSED

    PARSED.clear()
    listed = json.dumps(tools(300, params=20))
    assert len(listed) >= MIN_PARSED_CHARS
    first = loads_keeping_tools('{"model": "a", "tools": ' + listed + ', "n": 1}')
    again = loads_keeping_tools(('{"tools":' + listed + ' ,"model": "b"}').encode().decode())  # an equal, new text
    assert again == json.loads('{"tools":' + listed + ' ,"model": "b"}') and again["tools"].text == listed
    assert all(a is b for a, b in zip(again["tools"], first["tools"]))  # the same items: not parsed again
    other = listed.replace("tool_299", "tool_X99")  # same start, another list: parsed
    got = loads_keeping_tools('{"tools": ' + other + "}")
    assert got["tools"][-1]["function"]["name"] == "tool_X99" and got["tools"].text == other
    for bad in ('{"tools": ' + listed + "]}", '{"tools": ' + listed + ' "x": 1}', '{"tools": ' + listed[:-1] + "}"):
        with pytest.raises(ValueError):  # the known text in place, broken JSON around it: still an error
            loads_keeping_tools(bad)
    assert loads_keeping_tools('{"tools": ' + listed + "}")["tools"] == json.loads(listed)
    short = json.dumps(tools(2))
    loads_keeping_tools('{"tools": ' + short + "}")
    assert all(k.text != short for k in PARSED.entries)  # short lists are parsed each time (cheaper than keeping)


def test_a_misspelled_name_among_ten_thousand_tools_reads_no_spec_but_the_ones_it_needs() -> None:
    text = json.dumps(tools(10_000, params=20))
    ref = Refiner()
    res = ref.refine({"tools": text, "upstream": call("tool_4242", "{'p0': 1,}"), "format": "openai"})
    assert res["calls"] == [{"name": "tool_4242", "arguments": {"p0": 1}}]
    res = ref.refine({"tools": text, "upstream": call("tool_4242x", p0=1), "format": "openai"})
    assert res["stage"] in ("unchanged", "repaired")  # too many names to compare within tier 1's count, or snapped
    (cat,) = CACHE.entries.values()
    assert len(cat) == 10_000 and cat.read <= 2


def test_the_proxy_refines_against_a_large_tool_list_in_worker_processes() -> None:
    import httpx
    from fake_upstream import create_fake_upstream, serve_in_thread

    from refiner.proxy import create_app

    many = tools(500, params=10)
    with serve_in_thread(create_fake_upstream()) as up, serve_in_thread(create_app(up + "/v1", workers=1)) as proxy:
        for name in ("tool_321", "tol_321"):
            body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": many,
                    "x_fake": {"tool_calls": [{"name": name, "arguments": "{'p0': 5,}", "id": "c1"}]}}
            r = httpx.post(proxy + "/v1/chat/completions", json=body, timeout=60)
            (tc,) = r.json()["choices"][0]["message"]["tool_calls"]
            assert (tc["id"], tc["function"]["name"], json.loads(tc["function"]["arguments"])) == (
                "c1", "tool_321", {"p0": 5})
            assert r.headers["x-tool-refiner"] == "repaired"
            flat = [{"type": "function", **t["function"]} for t in many]  # the Responses API's tool shape
            r = httpx.post(proxy + "/v1/responses", json={"model": "m", "input": "x", "tools": flat,
                                                          "x_fake": body["x_fake"]}, timeout=60)
            (item,) = r.json()["output"]
            assert (item["call_id"], item["name"], json.loads(item["arguments"])) == ("c1", "tool_321", {"p0": 5})
