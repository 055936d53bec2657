"""Calls an upstream left in its answer's ``content`` (its own tool parser failed): found in every dialect the format
registry knows, moved to ``tool_calls``, with and without streaming; prose stays prose."""

from __future__ import annotations

import json

import httpx
import pytest
from fake_upstream import WEATHER_QUERY, WEATHER_TOOLS, create_fake_upstream, serve_in_thread

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats.base import Detection, WireFormat
from refiner.pipeline import Refiner
from refiner.proxy import create_app
from refiner.proxy.content import MAX_CHECKS, ContentSplit, Openers, markers

CALLS = [ToolCall("get_weather", {"city": "Paris", "days": 3}), ToolCall("get_time", {"tz": "CET"})]
NAMES = ["get_weather", "get_time"]
BY_NAME = [name for name in formats.names() if formats.get(name).detection.by_name]  # (detection never names them)


@pytest.fixture(scope="module")
def upstream():
    with serve_in_thread(create_fake_upstream()) as url:
        yield url


@pytest.fixture(scope="module")
def proxy(upstream):
    with serve_in_thread(create_app(upstream + "/v1")) as url:
        yield url


@pytest.fixture(scope="module")
def told(upstream):
    """A proxy told the formats detection never names (``--content-calls granite_pythonic``)."""
    with serve_in_thread(create_app(upstream + "/v1", content_calls=BY_NAME)) as url:
        yield url


def proxy_for(request, fmt: str) -> str:
    """The proxy a user of ``fmt`` runs: any proxy for a format detection names; one told the format for the others."""
    return request.getfixturevalue("told" if fmt in BY_NAME else "proxy")


def body(content: str, **kw) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": WEATHER_QUERY}], "tools": WEATHER_TOOLS,
            "x_fake": {"content": content}, **kw}


def stream(url: str, payload: dict) -> tuple[httpx.Headers, list[dict]]:
    chunks, done = [], False
    with httpx.stream("POST", url + "/v1/chat/completions", json={**payload, "stream": True}, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                assert not done
                chunks.append(json.loads(line[6:]))
    assert done
    return r.headers, chunks


def streamed(chunks: list[dict]) -> tuple[list[str], list[dict], str | None]:
    """The content pieces, the tool calls (their deltas merged as an OpenAI client merges them: by index, id and
    name once, argument fragments joined) and the last finish reason of a streamed answer."""
    pieces = [c["choices"][0]["delta"]["content"] for c in chunks
              if c.get("choices") and c["choices"][0]["delta"].get("content")]
    merged: dict[int, dict] = {}
    for c in chunks:
        for t in c["choices"][0]["delta"].get("tool_calls", []) if c.get("choices") else []:
            slot = merged.setdefault(t["index"], {"index": t["index"], "function": {"name": "", "arguments": ""}})
            for key in ("id", "type"):
                if key in t:
                    assert key not in slot, "id and type are sent once"
                    slot[key] = t[key]
            if t["function"].get("name"):
                assert not slot["function"]["name"], "the name is sent once"
                slot["function"]["name"] = t["function"]["name"]
            slot["function"]["arguments"] += t["function"].get("arguments") or ""
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
    return pieces, [merged[k] for k in sorted(merged)], finishes[-1]


def reasoning_of(chunks: list[dict]) -> str:
    return "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks if c.get("choices"))


def check_calls(tool_calls: list[dict]) -> None:
    """The two calls, by name; arguments wherever the format carries them (a name-only format carries none)."""
    assert [t["function"]["name"] for t in tool_calls] == NAMES
    args = [json.loads(t["function"]["arguments"]) for t in tool_calls]
    assert all(isinstance(a, dict) for a in args)
    if args[0]:
        assert args[0]["city"] == "Paris" and str(args[0]["days"]) == "3" and args[1] == {"tz": "CET"}
    assert all(t["id"].startswith("call_") and t["type"] == "function" for t in tool_calls)


# ------------------------------------------------------------------------------------------------ every dialect


@pytest.mark.parametrize("fmt", formats.names())
@pytest.mark.parametrize("prose", ["", "Let me check that for you.\n"])
def test_calls_in_content_are_moved_in_every_registered_format(request, fmt, prose) -> None:
    text = prose + formats.get(fmt).render(CALLS)
    r = httpx.post(proxy_for(request, fmt) + "/v1/chat/completions", json=body(text), timeout=60)
    choice = r.json()["choices"][0]
    check_calls(choice["message"]["tool_calls"])
    assert choice["message"]["content"] == (prose.strip() or None)  # the template's line break before the calls
    assert choice["finish_reason"] == "tool_calls"
    assert r.headers["x-tool-refiner-content-calls"] == f"0:{fmt}"


@pytest.mark.parametrize("fmt", formats.names())
def test_calls_in_streamed_content_are_held_back_and_moved(request, fmt) -> None:
    prose = "Let me check that for you, one moment.\n"
    _, chunks = stream(proxy_for(request, fmt), body(prose + formats.get(fmt).render(CALLS)))
    pieces, calls, finish = streamed(chunks)
    assert "".join(pieces) == prose.strip()  # the prose, in order; the call text never reaches the client as content
    deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
    said = [i for i, d in enumerate(deltas) if d.get("content")]
    called = [i for i, d in enumerate(deltas) if d.get("tool_calls")]
    assert said and called and max(said) < min(called)  # the prose goes out before the calls read after it
    check_calls(calls)
    assert finish == "tool_calls"
    assert chunks[-1]["tool_refiner"]["content_calls"] == [{"choice": 0, "format": fmt}]


def test_a_format_registered_later_is_picked_up(upstream, monkeypatch) -> None:
    """A new dialect is one module: its markers and its detection come from the registry at use, with no change to
    the proxy."""

    class Bracketed(WireFormat):
        name = "test_bracketed"
        description = "test only: a JSON list of calls between [[CALLS]] and [[/CALLS]]"
        tags = ("[[CALLS]]", "[[/CALLS]]")
        detection = Detection(rank=999, markers=("[[CALLS]]",), closers=("[[/CALLS]]",))
        example = '[[CALLS]][{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}][[/CALLS]]'

        def parse_strict(self, text: str) -> list[ToolCall]:
            start, end = text.find(self.tags[0]), text.find(self.tags[1])
            if start < 0 or end < 0:
                raise self.error("missing [[CALLS]] block")
            try:
                items = json.loads(text[start + len(self.tags[0]) : end])
            except ValueError as e:
                raise self.error(f"not JSON: {e}") from None
            return [ToolCall(i["name"], i["arguments"]) for i in items]

        def recover(self, text: str, out) -> None:
            out.calls.extend(self.parse_strict(text))

        def render(self, calls) -> str:
            items = [{"name": c.name, "arguments": dict(c.arguments)} for c in calls]
            return f"[[CALLS]]{json.dumps(items)}[[/CALLS]]"

    monkeypatch.setitem(formats.base._REGISTRY, Bracketed.name, Bracketed())
    assert "[[CALLS]]" in markers()
    text = "Sure.\n" + Bracketed().render(CALLS)
    assert formats.detect_format(text) == "test_bracketed"
    split = ContentSplit(Openers(NAMES))
    released = split.feed(text).release + split.end().release
    assert released == "Sure.\n" and split.held == text[len("Sure.\n"):]
    # through the proxy (tier 1 runs in threads here, so that it sees the registry this test changed)
    with serve_in_thread(create_app(upstream + "/v1", workers=0)) as url:
        r = httpx.post(url + "/v1/chat/completions", json=body(text), timeout=60)
        check_calls(r.json()["choices"][0]["message"]["tool_calls"])
        assert r.headers["x-tool-refiner-content-calls"] == "0:test_bracketed"
        _, chunks = stream(url, body(text))
    pieces, calls, _ = streamed(chunks)
    assert "".join(pieces) == "Sure." and [t["function"]["name"] for t in calls] == NAMES


def test_long_content_is_split_in_a_worker(proxy) -> None:
    """Content longer than the event loop splits itself (16,000 characters) goes to a worker; same answers."""
    prose = "The forecast, in long form. " * 1000 + "\n"
    r = httpx.post(proxy + "/v1/chat/completions", json=body(prose + formats.get("hermes").render(CALLS)), timeout=60)
    choice = r.json()["choices"][0]
    check_calls(choice["message"]["tool_calls"])
    assert choice["message"]["content"] == prose.rstrip()  # the blanks before the call end in a line break
    text = prose + "See [the docs](https://example.org).\n```python\nprint(1)\n```\n" + prose
    r = httpx.post(proxy + "/v1/chat/completions", json=body(text), timeout=60)
    assert r.json()["choices"][0]["message"] == {"role": "assistant", "content": text}


# ------------------------------------------------------------------------------------------------ prose stays prose

PROSE = [
    "It is sunny in Paris today, 24 degrees.",
    "I could call get_weather for Paris if you want; shall I?",
    "To call a tool, a model writes <tool_call> tags around JSON; I will not do that here.",
    "See [the forecast](https://example.org/paris) and [the map](https://example.org/map).\n- [x] done\n- [ ] todo",
    "Here is the code:\n```python\ndef get_weather(city):\n    return {'city': city}\n```\nand that is all.",
    "The answer as JSON:\n{\"answer\": 42, \"unit\": \"degrees\"}\nDone.",
    "[1, 2, 3] are the first numbers.\n{not json at all}\n",
    "get_weather(city) is a function you can call yourself.",
]


@pytest.mark.parametrize("text", PROSE)
def test_prose_that_only_talks_is_never_turned_into_calls(proxy, text) -> None:
    r = httpx.post(proxy + "/v1/chat/completions", json=body(text), timeout=60)
    assert r.json()["choices"][0]["message"] == {"role": "assistant", "content": text}
    assert r.json()["choices"][0]["finish_reason"] == "stop" and "x-tool-refiner-content-calls" not in r.headers
    _, chunks = stream(proxy, body(text))
    pieces, calls, finish = streamed(chunks)
    assert "".join(pieces) == text and calls == [] and finish == "stop"


def test_streamed_prose_is_not_held_to_the_end(proxy) -> None:
    """A markdown link, a checkbox and a code fence are released as soon as they prove to be text, not at the end."""
    text = ("See [the docs](https://example.org) first.\n- [x] checked\n```python\nprint('hi')\n```\n"
            + "and then a long tail of plain words " * 8)
    _, chunks = stream(proxy, body(text))
    pieces, _, _ = streamed(chunks)
    assert "".join(pieces) == text
    tail, sent, after = text.index("and then"), 0, 0
    for p in pieces:
        after += sent >= tail
        sent += len(p)
    assert after >= 20  # the plain tail streamed piece by piece, not held back to the end as one block


def test_a_cut_answer_keeps_its_text(proxy) -> None:
    """finish_reason "length": a half-written call in the content stays text (never completed into a call)."""
    text = 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    r = httpx.post(proxy + "/v1/chat/completions", json=body(text, x_fake={"content": text, "finish_reason": "length"}),
                   timeout=60)
    choice = r.json()["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": text} and choice["finish_reason"] == "length"
    _, chunks = stream(proxy, body(text, x_fake={"content": text, "finish_reason": "length"}))
    pieces, calls, finish = streamed(chunks)
    assert "".join(pieces) == text and calls == [] and finish == "length"


def test_hostile_content_is_bounded_and_returned_as_text(upstream) -> None:
    """A paren storm after a call tag (naming no offered tool): the answer comes back as the text it was, within
    the deadline, streamed or not."""
    def storm(n: int) -> str:
        return "Let me see.\n<tool_call>\n" + '{"name": "f", "arguments": {"a": 1, "b"' + "(" * n

    with serve_in_thread(create_app(upstream + "/v1", refine_timeout=0.3)) as url:
        r = httpx.post(url + "/v1/chat/completions", json=body(storm(200_000)), timeout=60)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == storm(200_000)
        assert r.headers["x-tool-refiner"] in ("timeout", "none")
        _, chunks = stream(url, body(storm(20_000)))
        assert "".join(streamed(chunks)[0]) == storm(20_000)


# ------------------------------------------------------------------------------------------------ content, reasoning, calls


def both(url: str, payload: dict) -> tuple[dict, dict]:
    """The non-streamed message and the streamed one (content, reasoning_content and tool calls merged), with the
    finish reasons."""
    r = httpx.post(url + "/v1/chat/completions", json=payload, timeout=60)
    assert r.status_code == 200
    choice = r.json()["choices"][0]
    _, chunks = stream(url, payload)
    pieces, calls, finish = streamed(chunks)
    merged = {"content": "".join(pieces) or None, "reasoning_content": reasoning_of(chunks) or None,
              "tool_calls": calls or None, "finish_reason": finish}
    whole = {"content": choice["message"].get("content"), "reasoning_content":
             choice["message"].get("reasoning_content"), "tool_calls": choice["message"].get("tool_calls"),
             "finish_reason": choice["finish_reason"]}
    return whole, merged


def same_answer(whole: dict, merged: dict) -> None:
    for key in ("content", "reasoning_content", "finish_reason"):
        assert whole[key] == merged[key], key
    assert [(t["function"]["name"], json.loads(t["function"]["arguments"])) for t in whole["tool_calls"] or []] == [
        (t["function"]["name"], json.loads(t["function"]["arguments"])) for t in merged["tool_calls"] or []]


HERMES_CALL = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>'


@pytest.mark.parametrize("fmt", formats.names())
def test_reasoning_prose_calls_and_text_after_them_in_every_format(request, fmt) -> None:
    """A reasoning block, prose, the calls and text after them: the block is reasoning_content, the prose around the
    calls is content (verbatim, nothing dropped, no marker), the calls are tool_calls; streamed = non-streamed."""
    url = proxy_for(request, fmt)
    text = "<think>Two lookups.</think>\n\nLet me check.\n" + formats.get(fmt).render(CALLS)
    whole, merged = both(url, body(text))
    same_answer(whole, merged)
    check_calls(whole["tool_calls"])
    assert whole["reasoning_content"] == "Two lookups."
    assert whole["content"] == "Let me check."  # the line breaks after </think> and before the calls are the template's
    after = "\n\nLet me check.\n" + formats.get(fmt if fmt in BY_NAME else "hermes").render(CALLS)
    whole, merged = both(url, body("<think>Two lookups.</think>" + after + "\nBoth are on their way."))
    same_answer(whole, merged)
    assert whole["content"] == "Let me check.\n\nBoth are on their way."  # blanks inside the content stay


@pytest.mark.parametrize("fmt", BY_NAME)
@pytest.mark.parametrize("prose", ["", "Let me check that for you.\n"])
def test_a_format_detection_never_names_is_not_guessed(proxy, fmt, prose) -> None:
    """Not told, the proxy reads such a text as detection does (another row's claim on untagged calls, or nothing),
    never in the format detection never names."""
    text = prose + formats.get(fmt).render(CALLS)
    r = httpx.post(proxy + "/v1/chat/completions", json=body(text), timeout=60)
    assert r.headers.get("x-tool-refiner-content-calls") != f"0:{fmt}"
    message = r.json()["choices"][0]["message"]
    if message.get("tool_calls"):  # another row's claim read them: moved out of the content, not copied
        assert [t["function"]["name"] for t in message["tool_calls"]] == NAMES
        assert message["content"] == (prose.strip() or None)
    else:
        assert text.strip() in message["content"]


@pytest.mark.parametrize(("text", "content", "names"), [
    ('Let me check.\nget_weather(city="Paris", days=3)\nget_time(tz="CET")', "Let me check.", NAMES),
    ('get_weather(city="Paris", days=3)', None, NAMES[:1]),
    ('get_weather(city="Paris", days=3); get_time(tz="CET")\nBoth asked.', "\nBoth asked.", NAMES),
])
def test_bare_call_lines_leave_the_content(proxy, text, content, names) -> None:
    """Calls written bare, one a line with no tag or bracket, are moved to ``tool_calls`` and out of the content."""
    whole, merged = both(proxy, body(text))
    same_answer(whole, merged)
    assert [t["function"]["name"] for t in whole["tool_calls"]] == names
    assert whole["content"] == content


@pytest.mark.parametrize("fmt", BY_NAME)
def test_the_refiners_format_tells_the_proxy_too(upstream, fmt) -> None:
    """The refiner's format (``Refiner(fmt=...)``, or the dialect a chat template derives) tells the proxy the format
    of content as ``--content-calls`` does; formats detection names are still read."""
    with serve_in_thread(create_app(upstream + "/v1", Refiner(engine=None, fmt=fmt), workers=0)) as url:
        for text, fmt_read in ((formats.get(fmt).render(CALLS), fmt), ("Sure.\n" + HERMES_CALL, "hermes")):
            r = httpx.post(url + "/v1/chat/completions", json=body(text), timeout=60)
            assert r.headers["x-tool-refiner-content-calls"] == f"0:{fmt_read}"
            assert r.json()["choices"][0]["message"]["content"] == (None if fmt_read == fmt else "Sure.")


def test_reasoning_without_calls_and_without_tools(proxy) -> None:
    whole, merged = both(proxy, body("<think>Easy.</think>Paris is the capital."))
    same_answer(whole, merged)
    assert (whole["reasoning_content"], whole["content"], whole["tool_calls"]) == ("Easy.", "Paris is the capital.",
                                                                                    None)
    payload = {**body("[THINK]Easy.[/THINK]Paris."), "tools": []}
    whole, merged = both(proxy, payload)
    same_answer(whole, merged)
    assert (whole["reasoning_content"], whole["content"]) == ("Easy.", "Paris.")


def test_a_prompt_that_opened_the_reasoning(proxy) -> None:
    """chat_template_kwargs.enable_thinking: the answer starts inside the block (Qwen3 thinking writes only the
    closer); cut inside the reasoning, all of it is reasoning. Without the hint, the text is the answer's."""
    kw = {"chat_template_kwargs": {"enable_thinking": True}}
    whole, merged = both(proxy, body("Need the time.\n</think>\n\n" + HERMES_CALL, **kw))
    same_answer(whole, merged)
    assert whole["reasoning_content"] == "Need the time." and whole["content"] is None
    assert [t["function"]["name"] for t in whole["tool_calls"]] == ["get_time"]
    whole, merged = both(proxy, body("The user wants", **kw, x_fake={"content": "The user wants",
                                                                      "finish_reason": "length"}))
    same_answer(whole, merged)
    assert (whole["reasoning_content"], whole["content"], whole["finish_reason"]) == ("The user wants", None, "length")
    # a block no closer ends stops where a call begins
    whole, merged = both(proxy, body("Need the time.\n" + HERMES_CALL, **kw))
    same_answer(whole, merged)
    assert whole["reasoning_content"] == "Need the time." and whole["tool_calls"]


def test_a_closer_with_no_hint_ends_the_reasoning_of_a_whole_answer(proxy) -> None:
    """No ``chat_template_kwargs`` (what LangChain, LiteLLM and the OpenAI SDK send): a thinking closer before any call
    still ends a block the prompt opened (non-streamed); thinking said off, or a closer inside a call's value, is
    no reasoning."""
    def whole(payload: dict) -> dict:
        r = httpx.post(proxy + "/v1/chat/completions", json=payload, timeout=60)
        assert r.status_code == 200
        return r.json()["choices"][0]["message"]

    message = whole(body("Need the time.\n</think>\n\n" + HERMES_CALL))
    assert message["reasoning_content"] == "Need the time." and message.get("content") is None
    assert [t["function"]["name"] for t in message["tool_calls"]] == ["get_time"]
    message = whole(body("Easy.[/THINK]Paris."))
    assert (message["reasoning_content"], message["content"]) == ("Easy.", "Paris.")
    off = whole(body("Plain </think> text.", chat_template_kwargs={"enable_thinking": False}))
    assert off["content"] == "Plain </think> text." and not off.get("reasoning_content")
    quoted = HERMES_CALL.replace('"CET"', '"CET</think>"')
    message = whole(body(quoted))
    assert not message.get("reasoning_content") and json.loads(message["tool_calls"][0]["function"]["arguments"]) == {
        "tz": "CET</think>"}


def test_a_call_written_inside_reasoning_is_not_a_call(proxy) -> None:
    text = "<think>I could write " + HERMES_CALL + " but the user only greets.</think>Hello!"
    whole, merged = both(proxy, body(text))
    same_answer(whole, merged)
    assert whole["tool_calls"] is None and whole["content"] == "Hello!" and "<tool_call>" in whole["reasoning_content"]


def test_reasoning_the_upstream_separated_is_kept(proxy) -> None:
    payload = body("\n\n" + HERMES_CALL, x_fake={"content": "\n\n" + HERMES_CALL, "reasoning": "I need the time."})
    whole, merged = both(proxy, payload)
    same_answer(whole, merged)
    assert whole["reasoning_content"] == "I need the time." and whole["content"] is None and whole["tool_calls"]


def test_gpt_oss_channels(proxy) -> None:
    """gpt-oss: analysis is reasoning, a preamble and the final answer are content, the recipient in the role
    header or in the channel both give a call."""
    text = ("<|channel|>analysis<|message|>Check the time.<|end|><|start|>assistant<|channel|>commentary<|message|>"
            "One moment.<|end|><|start|>assistant to=functions.get_time<|channel|>commentary <|constrain|>json"
            '<|message|>{"tz": "CET"}<|call|>')
    whole, merged = both(proxy, body(text))
    same_answer(whole, merged)
    assert (whole["reasoning_content"], whole["content"]) == ("Check the time.", "One moment.")
    assert [t["function"]["name"] for t in whole["tool_calls"]] == ["get_time"]
    final = "<|channel|>analysis<|message|>No tool needed.<|end|><|start|>assistant<|channel|>final<|message|>Hi!"
    whole, merged = both(proxy, body(final))
    same_answer(whole, merged)
    assert (whole["reasoning_content"], whole["content"], whole["tool_calls"]) == ("No tool needed.", "Hi!", None)


def test_kimi_k3_channels(proxy) -> None:
    """Kimi K3: the think channel is reasoning, the response channel's text is content without its markup, the tools
    channel gives the calls; a completion the prompt opened in the response channel (thinking off), one that skipped
    the think channel the prompt opened, and one without calls leak no control token."""
    o, c, s = "<|open|>", "<|close|>", "<|sep|>"
    call = (f'{o}tools{s}{o}call tool="get_time" index="1"{s}{o}argument key="tz" type="string"{s}CET{c}argument{s}'
            f"{c}call{s}{c}tools{s}")
    on, off = {"chat_template_kwargs": {"thinking": True}}, {"chat_template_kwargs": {"thinking": False}}
    cases = [
        (f"Need the time.{c}think{s}{o}response{s}One moment.{c}response{s}{call}{c}message{s}", on,
         ("Need the time.", "One moment.", ["get_time"])),
        (f"One moment.{c}response{s}{call}{c}message{s}", off, (None, "One moment.", ["get_time"])),
        (f"{c}response{s}{call}", off, (None, None, ["get_time"])),
        (f"Easy.{c}think{s}{o}response{s}Paris.{c}response{s}{c}message{s}", on, ("Easy.", "Paris.", [])),
        (f"Hi there.{c}response{s}{c}message{s}", off, (None, "Hi there.", [])),
        (f"{o}response{s}Hello world{c}response{s}{c}message{s}", on, (None, "Hello world", [])),
    ]
    for text, kw, want in cases:
        whole, merged = both(proxy, body(text, **kw))
        same_answer(whole, merged)
        got = (whole["reasoning_content"], whole["content"], [t["function"]["name"] for t in whole["tool_calls"] or []])
        assert got == want, text


def test_a_cut_answer_returns_its_complete_calls(proxy) -> None:
    """finish_reason "length" after one complete Hermes call and half of a second: the first is returned, the cut
    one is not (and is reported), the finish reason stays "length"."""
    text = HERMES_CALL + '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    payload = body(text, x_fake={"content": text, "finish_reason": "length"})
    whole, merged = both(proxy, payload)
    same_answer(whole, merged)
    assert [t["function"]["name"] for t in whole["tool_calls"]] == ["get_time"]
    assert whole["finish_reason"] == "length" and whole["content"] is None
    r = httpx.post(proxy + "/v1/chat/completions", json=payload, timeout=60)
    assert r.json()["tool_refiner"]["truncated"] == [{"choice": 0, "call": 1, "id": None, "from": "content",
                                                     "name": "get_weather"}]


def test_whitespace_before_a_moved_call_is_the_same_in_both_modes(proxy) -> None:
    text = "Checking.\n\n" + HERMES_CALL
    whole, merged = both(proxy, body(text))
    same_answer(whole, merged)
    assert whole["content"] == "Checking."  # the blank line before the call is the template's, in both modes
    whole, merged = both(proxy, body("Checking the  \t" + HERMES_CALL + "  then more."))
    same_answer(whole, merged)
    assert whole["content"] == "Checking the  \t  then more."  # spaces on the line are text


# ------------------------------------------------------------------------------- rows whose tags are no markup

RWKV_TIME = '**Tool Call:**\n```json\n{"name": "get_time", "arguments": {"tz": "CET"}}\n```'
COMMAND_R_TIME = 'Action:\n```json\n[{"tool_name": "get_time", "parameters": {"tz": "CET"}}]```'


@pytest.mark.parametrize("text", [
    'A settings file:\n```json\n{"city": "Paris", "units": "metric"}\n```\nSave it as weather.json.',
    'Command R+ writes Action: and then a fenced list.\n```json\n[{"tool_name": "plan", "parameters": {}}]\n```\n',
    'RWKV answers like this:\n**Tool Call:**\n```json\n{"name": "book_table", "arguments": {"seats": 2}}\n```\nok',
])
def test_a_fenced_json_example_is_not_a_call(proxy, text) -> None:
    """A JSON code fence in an answer, after a row's label or not, that calls no offered tool stays content."""
    whole, merged = both(proxy, body(text))
    same_answer(whole, merged)
    assert whole["content"] == text and whole["tool_calls"] is None


@pytest.mark.parametrize("call", [RWKV_TIME, COMMAND_R_TIME])
def test_a_fenced_call_is_cut_out_of_content(proxy, call) -> None:
    """A call between a row's label and its code fence leaves content; a fenced example before it stays."""
    example = 'The reply looks like:\n```json\n{"tz": "CET", "time": "14:05"}\n```\nAsking now.\n'
    whole, merged = both(proxy, body(example + call + "\nBack soon."))
    same_answer(whole, merged)
    assert [t["function"]["name"] for t in whole["tool_calls"]] == ["get_time"]
    assert whole["content"] == example + "\nBack soon."
    for size in (1, 3):  # the label arrives in pieces: nothing of it is released before the rest shows it
        assert split_all("Asking now.\n" + call, size, lambda region: False)[:2] == ("Asking now.\n", call)


# ------------------------------------------------------------------------------------------------ the split itself


def split_all(text: str, size: int, is_calls) -> tuple[str, str, int]:
    split = ContentSplit(Openers(NAMES))
    out = []

    def drive(step):
        while True:
            out.append(step.release)
            if step.check is None:
                return
            step = split.verdict(is_calls(step.check))

    for i in range(0, len(text), size):
        drive(split.feed(text[i : i + size]))
    drive(split.end())
    assert "".join(out) == split.released_text and split.released_text + split.held == text
    return split.released_text, split.held, split.checks


@pytest.mark.parametrize("size", [1, 2, 5, 10_000])
def test_split_holds_only_what_may_be_calls(size) -> None:
    assert "[TOOL_CALLS]" in markers()  # Mistral's marker, from the registry
    def calls(region: str) -> bool:
        return "get_weather" in region

    cases = {
        "Plain words, nothing else.": ("Plain words, nothing else.", ""),
        "Checking.\n<tool_call>\n{}\n</tool_call>": ("Checking.\n", "<tool_call>\n{}\n</tool_call>"),
        "See [a](b).\n[get_weather(city='Paris')]": ("See [a](b).\n", "[get_weather(city='Paris')]"),
        "Here: [get_weather(city='Paris')] ok": ("Here: ", "[get_weather(city='Paris')] ok"),
        'Sure.\n{"name": "get_weather"}\nmore': ("Sure.\n", '{"name": "get_weather"}\nmore'),
        'JSON:\n{"answer": 42}\nok': ('JSON:\n{"answer": 42}\nok', ""),
        "```python\nx = 1\n```\nafter": ("```python\nx = 1\n```\nafter", ""),
        '```json\n[{"name": "get_weather"}]\n```': ("", '```json\n[{"name": "get_weather"}]\n```'),
        "get_weather(city='Paris')\nget_time(tz='CET')": ("", "get_weather(city='Paris')\nget_time(tz='CET')"),
        "Bob's [list] of {things}\n  [x] done\n": ("Bob's [list] of {things}\n  [x] done\n", ""),
        "text ending with <tool_": ("text ending with <tool_", ""),
        "[get_weather(city='Par": ("", "[get_weather(city='Par"),
        'Ok.\n[TOOL_CALLS][{"name": "x"}] and more': ("Ok.\n", '[TOOL_CALLS][{"name": "x"}] and more'),
    }
    for text, (released, held) in cases.items():
        assert split_all(text, size, calls)[:2] == (released, held), (text, size)


def test_split_checks_are_bounded() -> None:
    text = "\n".join(f'{{"k{i}": {i}}}' for i in range(3 * MAX_CHECKS))
    released, held, checks = split_all(text, 7, lambda region: False)
    assert checks == MAX_CHECKS and released + held == text and held  # past the budget the rest is held


REASONING_TEXTS = [
    "<think>plan</think>\n\nanswer",
    "  <think>\nplan\n</think>\n\n<tool_call>\n{}\n</tool_call>",
    "plan with a closer</think>answer",
    "Need to look.\n<tool_call>\n<function=ls>\n</function>\n</tool_call>",
    "<think>Draft <tool_call>{}</tool_call>\nstill thinking</think>done",
    "<think>never closed, cut here",
    "[THINK]Two cities.[/THINK][TOOL_CALLS]f[ARGS]{}",
    "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant<|channel|>final<|message|>Hi",
    '<tool_call>\n{"name": "f", "arguments": {"s": "</think>"}}\n</tool_call>',
    "<thi", "", "\n\n", "plain answer with <think> in the middle</think> and more",
    # long blocks (the buffer drops what was sent): a closer, a call that ends a block no closer ends
    "<think>" + "a thought that mentions <tool_ and </thin once\n" * 400 + "</think>\n\nanswer",
    "step by step\n" * 900 + "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<think>" + "x" * 9000 + "</think>" + "y" * 10,
]


@pytest.mark.parametrize("opened", [False, True])
@pytest.mark.parametrize("text", REASONING_TEXTS)
def test_the_streamed_reasoning_split_equals_the_whole_one(text, opened) -> None:
    import random

    from refiner.proxy.reasoning import Reasoning

    want = Reasoning(opened).read(text)
    for seed in range(6):
        rng, pieces, i = random.Random(seed), [], 0
        while i < len(text):
            k = 1 if seed == 0 else rng.randint(1, 7)
            pieces.append(text[i : i + k])
            i += k
        rs = Reasoning(opened)
        outs = [rs.feed(p) for p in pieces] + [rs.end()]
        reasoning, answer = "".join(o[0] for o in outs), "".join(o[1] for o in outs)
        assert (reasoning if rs.found else None, answer) == (want[0] or (None if want[0] is None else ""), want[1])
        if want[0] and seed == 0 and len(want[0]) > 12 and "\n" not in want[0] and "<" not in want[0]:
            assert sum(1 for o in outs if o[0]) > 3  # reasoning is sent as it comes, not at the end


def test_calls_in_reasoning_when_switched_on(upstream) -> None:
    """serve --calls-in-reasoning (Refiner(calls_in_reasoning=True)): a call written only inside the reasoning is
    returned as a call; the reasoning stays as it came. Streamed = non-streamed."""
    from refiner.pipeline import Refiner

    text = "<think>I will call " + HERMES_CALL + "</think>One moment."
    with serve_in_thread(create_app(upstream + "/v1", Refiner(engine=None, calls_in_reasoning=True),
                                    workers=0)) as url:
        whole, merged = both(url, body(text))
    same_answer(whole, merged)
    assert [t["function"]["name"] for t in whole["tool_calls"]] == ["get_time"]
    assert whole["content"] == "One moment." and whole["reasoning_content"] == "I will call " + HERMES_CALL


def test_an_upstream_failure_mid_stream_releases_what_was_held(upstream) -> None:
    """The upstream stalls after the content (a read timeout): a call that had closed went out as a call as soon as
    it closed; the held text of one still open (the call, the blanks before it) reaches the client as it came,
    before the error event; the reasoning went out as reasoning."""
    text = "<think>plan</think>Check.\n\n" + HERMES_CALL
    cut = "<think>plan</think>Check.\n\n" + HERMES_CALL[:-5]
    with serve_in_thread(create_app(upstream + "/v1", timeout=1.0, workers=0)) as url:
        _, chunks = stream(url, body(text, x_fake={"content": text, "stream_stall": 3}))
        _, open_chunks = stream(url, body(cut, x_fake={"content": cut, "stream_stall": 3}))
    for got, held, names in ((chunks, "", ["get_time"]), (open_chunks, HERMES_CALL[:-5], [])):
        assert got[-1]["error"]["type"] == "upstream_timeout"
        pieces, calls, _ = streamed([c for c in got if c.get("choices")] + [{"choices": [{"delta": {},
                                                                                          "finish_reason": None}]}])
        assert "".join(pieces) == "Check.\n\n" + held and reasoning_of(got) == "plan"
        assert [c["function"]["name"] for c in calls] == names


def test_an_upstream_failure_mid_stream_releases_an_answer_held_for_its_reasoning(upstream) -> None:
    """An answer held while it is not known whether the prompt opened a reasoning block (no block marker yet)
    reaches the client as it came when the upstream stalls, before the error event."""
    text = "Sure: the weather in Paris is fine today."
    with serve_in_thread(create_app(upstream + "/v1", timeout=1.0, workers=0)) as url:
        _, got = stream(url, body(text, x_fake={"content": text, "stream_stall": 3}))
    assert got[-1]["error"]["type"] == "upstream_timeout"
    pieces, calls, _ = streamed([c for c in got if c.get("choices")] + [{"choices": [{"delta": {},
                                                                                      "finish_reason": None}]}])
    assert "".join(pieces) == text and not calls and reasoning_of(got) == ""


@pytest.mark.parametrize("fmt", ["qwen3_coder", "hermes", "minimax_m2"])
def test_a_call_to_a_tool_not_offered_stays_in_the_content(proxy, fmt) -> None:
    """A call in the content to a tool the request does not offer is not moved to ``tool_calls`` (the client could
    not run it); its text stays in the content whole, markup and all, never dropped."""
    text = "Let me check.\n" + formats.get(fmt).render([ToolCall("book_flight", {"to": "Oslo"})])
    whole, merged = both(proxy, body(text))
    same_answer(whole, merged)
    assert (whole["content"], whole["tool_calls"]) == (text, None)
