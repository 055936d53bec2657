"""Streamed answers as a thinking model writes them with no hint (reasoning, ``</think>``, then calls, no opener), and
calls sent as soon as they close: what the proxy knows of the prompt (chat template, per-model setting, earlier
answers), what it holds while it cannot tell, and stream = non-stream under every chunking."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from fake_upstream import WEATHER_QUERY, WEATHER_TOOLS, create_fake_upstream, serve_in_thread

from refiner.formats.derive.render import ChatTemplate
from refiner.proxy import create_app
from refiner.proxy.reasoning import HOLD_CHARS, Reasoning
from refiner.proxy.thinking import PromptReasoning, answer_says, leans, prompt_opens

CALL = '<tool_call>\n{{"name": "get_time", "arguments": {{"tz": "{}"}}}}\n</tool_call>'
QWEN3_THINKING = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                  "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")
HYBRID = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and not "
          "enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}")


def body(content: str, model: str = "m", **kw) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": WEATHER_QUERY}], "tools": WEATHER_TOOLS,
            "x_fake": {"content": content, **kw.pop("fake", {})}, **kw}


def chunked(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def exchange(url: str, payload: dict) -> tuple[dict, list[tuple[float, dict]]]:
    """The streamed answer merged (content, reasoning, calls) and its chunks with the time each arrived."""
    got: list[tuple[float, dict]] = []
    with httpx.stream("POST", url + "/v1/chat/completions", json={**payload, "stream": True}, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                got.append((time.perf_counter(), json.loads(line[6:])))
    content, reasoning, calls = [], [], {}
    for _, c in got:
        for ch in c.get("choices") or []:
            d = ch["delta"]
            content.append(d.get("content") or "")
            reasoning.append(d.get("reasoning_content") or "")
            for t in d.get("tool_calls") or []:
                slot = calls.setdefault(t["index"], ["", ""])
                slot[0] += (t.get("function") or {}).get("name") or ""
                slot[1] += (t.get("function") or {}).get("arguments") or ""
    merged = {"content": "".join(content) or None, "reasoning_content": "".join(reasoning) or None,
              "calls": [(n, json.loads(a)) for n, a in (calls[k] for k in sorted(calls))]}
    return merged, got


def whole(url: str, payload: dict) -> dict:
    message = httpx.post(url + "/v1/chat/completions", json=payload, timeout=60).json()["choices"][0]["message"]
    return {"content": message.get("content"), "reasoning_content": message.get("reasoning_content"),
            "calls": [(t["function"]["name"], json.loads(t["function"]["arguments"]))
                      for t in message.get("tool_calls") or []]}


@pytest.fixture(scope="module")
def upstream():
    with serve_in_thread(create_fake_upstream()) as url:
        yield url


# ---------------------------------------------------------------------------------------------------- the prompt


def test_the_template_says_whether_the_generation_prompt_opens_the_block() -> None:
    thinking, hybrid = ChatTemplate(QWEN3_THINKING, "thinking"), ChatTemplate(HYBRID, "hybrid")
    assert prompt_opens(thinking) is True
    assert prompt_opens(hybrid) is False and prompt_opens(hybrid, {"enable_thinking": False}) is False
    assert prompt_opens(ChatTemplate("{{ raise_exception('no') }}", "broken")) is None
    prompts = PromptReasoning(thinking, {"other": False})
    assert prompts.opened({"model": "m"}) is True and prompts.opened({"model": "other"}) is False
    assert prompts.opened({"model": "m", "chat_template_kwargs": {"enable_thinking": False}}) is False


def test_what_an_answer_says_of_its_prompt() -> None:
    assert answer_says("plan\n</think>\n\nParis.", "stop") is True
    assert answer_says("<think>plan</think>Paris.", "stop") is False  # it opens its own block
    assert answer_says("Paris.", "stop") is False and answer_says("Par", "length") is None
    assert answer_says(CALL.format("CET</think>"), "tool_calls") is None  # a closer inside a call tells nothing
    prompts = PromptReasoning()
    prompts.learn({"model": "m"}, "plan</think>Paris.", "stop")
    prompts.learn({"model": "h", "chat_template_kwargs": {"enable_thinking": True}}, "plan</think>x", "stop")
    assert prompts.opened({"model": "m"}) is True and prompts.opened({"model": "h"}) is None
    assert prompts.opened({"model": "m"}, whole=True) is None  # a whole answer reads its own text


@pytest.mark.parametrize("text", ["plan\n</think>\n\nParis.", "Paris.", "<think>a</think>b", "  \n[{\"a\": 1}]</think>",
                                  CALL.format("CET</think>"), "x[/THINK]y", "plain </think>" + CALL.format("CET")])
@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_a_stream_with_nothing_known_reads_as_the_whole_answer(text: str, size: int) -> None:
    """opened=None: held until the first thinking closer (or the end); the pieces join to the whole answer's split."""
    stream = Reasoning(None)
    reasoning, answer = [], []
    for piece in chunked(text, size):
        r, a = stream.feed(piece)
        reasoning.append(r)
        answer.append(a)
    r, a = stream.end()
    want = Reasoning(None).read(text)
    assert ("".join(reasoning + [r]) or None, "".join(answer + [a])) == (want[0] or None, want[1])


def test_what_is_held_while_nothing_is_known_is_bounded() -> None:
    stream = Reasoning(None)
    assert stream.feed("x" * HOLD_CHARS) == ("", "")
    assert stream.feed("yz") == ("", "x" * HOLD_CHARS + "yz")  # past the bound: no block, passed on as the answer
    assert stream.feed("</think>") == ("", "</think>")


# ---------------------------------------------------------------------------------------------------- the model's name

LEAN_TEXTS = [("The user wants the weather in Paris, so I", True),  # cut inside the reasoning
              ("Need to look.\n" + CALL.format("CET"), False),  # a call ends a block the model did not close
              ("Paris is the capital of France.", False),  # ended by itself, no call: thinking was off
              ("Checking." + CALL.format("CET"), False),  # a call not at a line start: the text is content
              ("plan\n</think>\n\nParis.", False), ("<think>a</think>b", False), ("[{\"a\": 1}]", True),
              (CALL.format("CET</think>"), False), ("x" * (HOLD_CHARS + 50), False),
              ("x" * (HOLD_CHARS + 50) + "</think>Paris.", False)]


def test_model_names_whose_template_opens_the_block_by_default() -> None:
    for name in ("Qwen/Qwen3-4B-Thinking-2507", "Qwen/Qwen3.5-9B", "qwen3.6-27b-fp8", "Qwen/QwQ-32B", "zai-org/GLM-4.7",
                 "zai-org/GLM-5.3", "moonshotai/Kimi-K2.6", "deepseek-ai/DeepSeek-R1-0528"):
        assert leans(name), name
    for name in ("Qwen/Qwen3-8B", "Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3.5-coder", "zai-org/GLM-4.5",
                 "deepseek-ai/DeepSeek-V3.2", "moonshotai/Kimi-K2-Instruct-0905", "meta-llama/Llama-3.3-70B", None):
        assert not leans(name), name
    prompts = PromptReasoning()
    assert prompts.leans({"model": "Qwen/Qwen3.5-9B"}) and not prompts.leans({"model": "Qwen/Qwen3-8B"})
    prompts.learn({"model": "Qwen/Qwen3.5-9B"}, "Paris.", "stop")  # an answer of that model showed thinking off
    assert not prompts.leans({"model": "Qwen/Qwen3.5-9B"})
    assert answer_says("Need to look.\n" + CALL.format("CET"), "tool_calls") is None  # a call may end the block


@pytest.mark.parametrize("text,cut", LEAN_TEXTS)
@pytest.mark.parametrize("size", [1, 3, 7, 5000])
def test_a_leaning_stream_reads_as_the_whole_answer(text: str, cut: bool, size: int) -> None:
    """A model whose template opens the block by default, nothing else known: held as with nothing known, then read
    inside the block when cut, when a call begins a line, or past the hold bound; the pieces join to the whole split."""
    stream = Reasoning(None, lean=True)
    reasoning, answer = [], []
    for piece in chunked(text, size):
        r, a = stream.feed(piece)
        reasoning.append(r)
        answer.append(a)
    r, a = stream.end(cut)
    want = Reasoning(None, lean=True).read(text, cut=cut)
    assert ("".join(reasoning + [r]) or None, "".join(answer + [a])) == (want[0] or None, want[1])


def test_what_a_leaning_model_is_read_as() -> None:
    assert Reasoning(None, lean=True).read("The user wants", cut=True) == ("The user wants", "")
    assert Reasoning(None, lean=False).read("The user wants", cut=True) == (None, "The user wants")
    assert Reasoning(None, lean=True).read("Need to look.\n" + CALL.format("CET")) == (
        "Need to look.", CALL.format("CET"))
    assert Reasoning(None, lean=True).read("Paris.") == (None, "Paris.")
    long = "y" * (HOLD_CHARS + 1)
    assert Reasoning(None, lean=True).read(long) == (long, "")
    stream = Reasoning(None, lean=True)
    assert stream.feed(long) == (long, "")  # past the bound it is taken to be reasoning, and sent
    assert stream.feed("more</think>Paris.") == ("more", "Paris.")


def test_a_cut_answer_of_a_thinking_model_is_reasoning_with_no_hint(upstream) -> None:
    """Through the proxy, no hint: a Qwen3.5 answer cut inside its reasoning comes back as reasoning_content, streamed
    (in every chunking) and not; the same text from a model the proxy knows nothing of stays content; an answer that
    ended by itself stays content."""
    cut = "The user wants the time in Central Europe, so I will"
    with serve_in_thread(create_app(upstream + "/v1", workers=0)) as url:
        for size in (1, 4, 100):
            fake = {"finish_reason": "length", "content_pieces": chunked(cut, size)}
            merged, _ = exchange(url, body(cut, model="Qwen/Qwen3.5-9B", fake=fake))
            assert merged == whole(url, body(cut, model="Qwen/Qwen3.5-9B", fake={"finish_reason": "length"}))
            assert merged == {"content": None, "reasoning_content": cut, "calls": []}
        other = whole(url, body(cut, model="some/model", fake={"finish_reason": "length"}))
        assert other == {"content": cut, "reasoning_content": None, "calls": []}
        said = "It is 14:05 in Central Europe."
        merged, _ = exchange(url, body(said, model="Qwen/Qwen3.6-35B", fake={"content_pieces": chunked(said, 3)}))
        assert merged == {"content": said, "reasoning_content": None, "calls": []}
        preamble = "I need the time.\n" + CALL.format("CET")
        merged, _ = exchange(url, body(preamble, model="zai-org/GLM-4.7", fake={"content_pieces": chunked(preamble, 5)}))
        assert merged == whole(url, body(preamble, model="zai-org/GLM-4.7"))
        assert merged == {"content": None, "reasoning_content": "I need the time.", "calls": [("get_time", {"tz": "CET"})]}


# ---------------------------------------------------------------------------------------------------- through the proxy

THOUGHT = "The user wants the time in Central Europe, so I call get_time with tz CET and then report it."
REASONED = THOUGHT + "\n</think>\n\n" + CALL.format("CET")


def test_streamed_reasoning_with_no_hint_from_the_template(upstream, tmp_path) -> None:
    """serve --chat-template of a thinking model: the reasoning goes out as reasoning_content from the first piece
    (before the closer arrives), never as content; the answer equals the non-streamed one."""
    path = tmp_path / "chat_template.jinja"
    path.write_text(QWEN3_THINKING)
    pieces = chunked(REASONED, 3)
    with serve_in_thread(create_app(upstream + "/v1", workers=0, chat_template=str(path))) as url:
        merged, got = exchange(url, body(REASONED, fake={"content_pieces": pieces, "piece_delay": 0.01}))
        assert merged == whole(url, body(REASONED))
    assert merged["reasoning_content"] == THOUGHT and merged["content"] is None
    first = next(t for t, c in got if c["choices"] and c["choices"][0]["delta"].get("reasoning_content"))
    last = max(t for t, c in got if c["choices"] and c["choices"][0]["delta"].get("reasoning_content"))
    assert last - first > 0.05  # sent as it came, not held to the closer


def test_per_model_setting_and_learned_answers(upstream) -> None:
    """--opens-reasoning MODEL=yes streams reasoning from the first piece; with nothing known the first answer is held
    until its closer (one reasoning delta, none as content), and the next one of that model streams from the first
    piece (learned)."""
    pieces = chunked(REASONED, 3)
    fake = {"content_pieces": pieces, "piece_delay": 0.005}

    def reasoning_deltas(got):
        return sum(1 for _, c in got if c["choices"] and c["choices"][0]["delta"].get("reasoning_content"))

    with serve_in_thread(create_app(upstream + "/v1", workers=0, opens_reasoning={"set": True})) as url:
        set_, got = exchange(url, body(REASONED, model="set", fake=fake))
        assert reasoning_deltas(got) > 3
        first, got = exchange(url, body(REASONED, model="new", fake=fake))
        assert reasoning_deltas(got) == 1
        second, got = exchange(url, body(REASONED, model="new", fake=fake))
        assert reasoning_deltas(got) > 3
        said = httpx.get(url + "/health").json()["opens_reasoning"]
        assert said["learned"]["new"] is True and "qwq" in said["opens_by_default"]
    for merged in (set_, first, second):
        assert merged["reasoning_content"] == THOUGHT and merged["content"] is None
        assert merged["calls"] == [("get_time", {"tz": "CET"})]


def test_calls_are_sent_as_they_close(upstream) -> None:
    """A call early in a long generation goes out as soon as its closing tag has come, long before the generation
    ends; two whole calls in one piece go out together; a call still open at the end is never sent as a call. (The
    model's prompt is said not to open a reasoning block: with nothing known, the text would be held until a closer
    or the end, calls included.)"""
    text = "Checking.\n" + CALL.format("CET") + "\n" + CALL.format("UTC") + "\n" + CALL.format("Europe/Par")[:-17]
    pieces = ["Checking.\n", CALL.format("CET"), "\n", *(["."] * 40), "\n" + CALL.format("UTC") + "\n"]
    with serve_in_thread(create_app(upstream + "/v1", workers=0, opens_reasoning={"*": False})) as url:
        merged, got = exchange(url, body("".join(pieces), fake={"content_pieces": pieces, "piece_delay": 0.01}))
        calls_at = [t for t, c in got if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
        finish_at = next(t for t, c in got if c["choices"] and c["choices"][0]["finish_reason"])
        assert finish_at - calls_at[0] > 0.2  # the first call went out some 40 pieces before the end
        two = "Now.\n" + CALL.format("CET") + "\n" + CALL.format("UTC")
        both, _ = exchange(url, body(two, fake={"content_pieces": ["Now.\n", two[5:], "\nDone."]}))
        assert both["calls"] == [("get_time", {"tz": "CET"}), ("get_time", {"tz": "UTC"})]
        assert both == whole(url, body(two + "\nDone."))
        cut, _ = exchange(url, body(text, fake={"finish_reason": "length", "content_pieces": chunked(text, 2)}))
        assert cut["calls"] == [("get_time", {"tz": "CET"}), ("get_time", {"tz": "UTC"})]
        assert cut == whole(url, body(text, fake={"finish_reason": "length"}))
    assert merged["calls"] == [("get_time", {"tz": "CET"}), ("get_time", {"tz": "UTC"})]
    assert merged["content"] == "Checking."


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_a_closing_tag_inside_a_value_sends_no_call_early(upstream, size: int) -> None:
    """``</tool_call>`` written inside an argument is no call's end: nothing goes out until the call really closes,
    and the stream equals the whole answer in every chunking (split inside the markers and the multi-byte text)."""
    text = ("Sure — 東京 🚀.\n" + '<tool_call>\n{"name": "get_time", "arguments": {"tz": "Use <tool_call> ... '
            '</tool_call> tags 🚀"}}\n</tool_call>\n' + CALL.format("CET"))
    with serve_in_thread(create_app(upstream + "/v1", workers=0)) as url:
        merged, _ = exchange(url, body(text, fake={"content_pieces": chunked(text, size)}))
        assert merged == whole(url, body(text))
    assert merged["calls"] == [("get_time", {"tz": "Use <tool_call> ... </tool_call> tags 🚀"}),
                               ("get_time", {"tz": "CET"})]


# ---------------------------------------------------------------------------------------------------- upstream calls


def paced_upstream(calls: list[tuple[str, str, str]], pause: float, finish: str = "tool_calls"):
    """An upstream that streams its own tool calls (``(id, name, arguments)``), each as a head and argument fragments,
    with ``pause`` seconds after each call (a generation's pace); non-streamed, the same calls at once."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    def chunk(delta: dict, reason: str | None = None) -> str:
        return "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                                      "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}) + "\n\n"

    async def events():
        import asyncio

        yield chunk({"role": "assistant", "content": ""})
        for k, (cid, name, args) in enumerate(calls):
            yield chunk({"tool_calls": [{"index": k, "id": cid, "type": "function",
                                         "function": {"name": name, "arguments": ""}}]})
            for i in range(0, len(args), 4):
                yield chunk({"tool_calls": [{"index": k, "function": {"arguments": args[i : i + 4]}}]})
            await asyncio.sleep(pause)
        yield chunk({}, finish)
        yield "data: [DONE]\n\n"

    async def completions(request):
        body = await request.json()
        if body.get("stream"):
            return StreamingResponse(events(), media_type="text/event-stream")
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}} for cid, name, args in calls]}
        return JSONResponse({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                             "choices": [{"index": 0, "message": message, "finish_reason": finish}]})

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def test_upstream_tool_calls_are_sent_as_each_completes() -> None:
    """An upstream that parses calls itself streams them one after the other: each goes out refined (the misspelled
    name snapped) as soon as it is complete (its arguments a whole JSON object, or the next call begun), long before
    the stream ends; the stream equals the non-streamed answer; a call cut by the token limit is never sent."""
    calls = [("call_a", "get_time", '{"tz": "UTC"}'), ("call_b", "get_wether", "{'city': 'Paris', 'days': '3',}"),
             ("call_c", "get_time", '{"tz": "CET"}')]
    payload = {"model": "m", "messages": [{"role": "user", "content": WEATHER_QUERY}], "tools": WEATHER_TOOLS}
    with serve_in_thread(paced_upstream(calls, 1.0)) as up, serve_in_thread(create_app(up + "/v1", workers=0)) as url:
        merged, got = exchange(url, payload)
        assert merged == whole(url, payload)
        assert merged["calls"] == [("get_time", {"tz": "UTC"}), ("get_weather", {"city": "Paris", "days": 3}),
                                   ("get_time", {"tz": "CET"})]
        heads = [t for t, c in got for ch in c["choices"] for d in ch["delta"].get("tool_calls") or [] if "id" in d]
        end = next(t for t, c in got if c["choices"] and c["choices"][0]["finish_reason"])
        assert len(heads) == 3
        assert heads[1] - heads[0] > 0.5  # the first went out as its arguments closed, a pause before the next
        assert end - heads[2] > 0.5  # the second (not JSON: complete once the third began) and the third before the end
    cut = calls[1:2] + [("call_c", "get_time", '{"tz": "CE')]
    with serve_in_thread(paced_upstream(cut, 0.05, "length")) as up, \
            serve_in_thread(create_app(up + "/v1", workers=0)) as url:
        merged, _ = exchange(url, payload)
        assert merged == whole(url, payload)
        assert merged["calls"] == [("get_weather", {"city": "Paris", "days": 3})]
