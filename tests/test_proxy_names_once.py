"""A request's tool names are read once per request, not once per question its content split asks: an answer with
more regions that may be calls reads them as often as one with a single region, streamed or not."""

from __future__ import annotations

import httpx
import pytest
from fake_upstream import WEATHER_QUERY, WEATHER_TOOLS, create_fake_upstream, serve_in_thread

from refiner.proxy import content, create_app

REGION = '[{"note": "a list of records, not a call"}]\n'
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.fixture(scope="module")
def upstream():
    with serve_in_thread(create_fake_upstream()) as url:
        yield url


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_tool_names_are_read_once_per_request(upstream, monkeypatch, stream) -> None:
    reads = []  # one per tool whose name is read
    original = content.tool_name
    monkeypatch.setattr(content, "tool_name", lambda tool: reads.append(1) or original(tool))

    def names_read(regions: int) -> int:
        reads.clear()
        body = {"model": "m", "messages": [{"role": "user", "content": WEATHER_QUERY}], "tools": WEATHER_TOOLS,
                "stream": stream, "x_fake": {"content": "Here.\n" + REGION * regions + CALL},
                "chat_template_kwargs": {"enable_thinking": False}}
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
        assert r.status_code == 200 and "get_weather" in r.text
        return len(reads)

    with serve_in_thread(create_app(upstream + "/v1", workers=0, heal_history=False)) as url:
        one, many = names_read(1), names_read(5)
    assert one == many <= 2 * len(WEATHER_TOOLS), (one, many)
