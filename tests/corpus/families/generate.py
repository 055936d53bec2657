"""Writes ``tests/corpus/families/<family>.jsonl``: raw outputs of the model families of issue 20, one file per family,
in canitoolcall's fixture layout (see README.md here). Run it from the repository root after editing a family:

    python tests/corpus/families/generate.py

Each family's spelling below was read from its chat template and its published parsers (vLLM's
``vllm/tool_parsers/*``, SGLang's ``python/sglang/srt/function_call/*``, llama.cpp's ``models/templates`` and
``tests/test-chat.cpp``; the exact files are in each family's ``sources``) and written out here by hand, with its own
small writer; nothing in this file imports the refiner, so the corpus does not share a line with the code it tests.
Rows copied from an engine's test or from a public bug report are listed verbatim in ``COPIED`` with where they come
from.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GENERATOR = "tests/corpus/families/generate.py"
VLLM = "https://github.com/vllm-project/vllm/blob/main/"
SGLANG = "https://github.com/sgl-project/sglang/blob/main/"
LLAMACPP = "https://github.com/ggml-org/llama.cpp/blob/master/"


def _fn(name: str, description: str, properties: dict, required: list[str] | None = None) -> dict:
    params: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        params["required"] = required
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


TOOLS = [
    _fn("get_weather", "Current weather for a city.",
        {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
         "days": {"type": "integer"}}, ["city"]),
    _fn("search_docs", "Search the documentation.",
        {"query": {"type": "string"},
         "filters": {"type": "object", "properties": {"site": {"type": "string"}, "max_results": {"type": "integer"},
                                                       "tags": {"type": "array", "items": {"type": "string"}}}},
         "exact": {"type": "boolean"}}, ["query"]),
    _fn("create_ticket", "Open a support ticket.",
        {"title": {"type": "string"}, "priority": {"type": "integer"}, "estimate_hours": {"type": "number"},
         "urgent": {"type": "boolean"}, "assignee": {"type": ["string", "null"]},
         "labels": {"type": "array", "items": {"type": "string"}}, "zip_code": {"type": "string"},
         "meta": {"type": "object", "properties": {"source": {"type": "string"}, "retries": {"type": "integer"}}}},
        ["title"]),
    _fn("get_time", "Current UTC time.", {}),
]

# The calls every family writes (name, arguments).
SINGLE = [("get_weather", {"city": "Paris", "unit": "celsius"})]
PARALLEL = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo", "days": 3})]
NESTED = [("search_docs", {"query": "rate limits", "filters": {"site": "docs.example.com", "max_results": 5,
                                                                "tags": ["api", "quota"]}, "exact": False})]
TYPED = [("create_ticket", {"title": "404 on login page", "priority": 2, "estimate_hours": 1.5, "urgent": True,
                            "assignee": None, "labels": ["web", "2024"], "zip_code": "02139",
                            "meta": {"source": "email", "retries": 0}})]
LOOKS_TYPED = [("create_ticket", {"title": "true", "zip_code": "10001", "labels": ["1", "null"]})]
NO_ARGS = [("get_time", {})]
REASONING = "The user wants the weather in Paris; get_weather answers that."
BEFORE = "Let me look that up for you."
PROSE = "Paris is the capital of France, on the Seine."


# ---------------------------------------------------------------------------------------------------------------
# Value writers the families share (each family picks one)

def json_value(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


def raw_or_json(v: Any) -> str:
    """Strings as written, anything else as JSON (the XML dialects whose parsers type values by the schema)."""
    return v if isinstance(v, str) else json_value(v)


def python_str(v: Any) -> str:
    """Jinja's ``value | string``: Python's ``str`` (Seed-OSS's template writes non-strings this way)."""
    return v if isinstance(v, str) else str(v)


def args_json(args: dict) -> str:
    return json.dumps(args, ensure_ascii=False)


@dataclass
class Family:
    slug: str
    models: list[str]
    sources: list[str]  # URLs of the template / parser / test the spelling was read from
    markers: list[str]  # strings that must never reach content, reasoning or arguments
    write: Callable[[list[tuple[str, dict]]], str]  # the call section for a list of calls
    reasoning: Callable[[str], str] | None = None  # the reasoning block as the model writes it (None: not verified)
    content: Callable[[str], str] = lambda t: t  # how plain answer text is written
    joiner: str = ""  # between content and the call section
    closer: str | None = None  # the last closing marker of a call section (the "lost closer" row drops it)
    junk: str | None = None  # a call section holding no call (must yield no call)
    parallel: bool = True
    typed_rows: bool = True
    scenarios: Callable[[], list[dict]] | None = None  # a family with its own scenario set
    text_before: bool = True  # the family writes answer text before a call
    no_call_tail: str = ""  # written after the answer text when no call follows (a channel's closer)
    content_then_calls: Callable[[str], str] | None = None  # answer text when calls follow (default: ``content``)
    first_strip: str = ""  # a prefix the generation prompt already holds, dropped from the completion's start
    notes: str = ""
    extra: list[dict] = field(default_factory=list)


def compose(fam: Family, calls: list[tuple[str, dict]] | None, *, reasoning: str | None = None,
            content: str | None = None) -> str:
    out = ""
    if reasoning is not None and fam.reasoning is not None:
        out += fam.reasoning(reasoning)
    if content:
        out += fam.content_then_calls(content) if calls and fam.content_then_calls else fam.content(content)
    if calls:
        out += (fam.joiner if content else "") + fam.write(calls)
    elif content:
        out += fam.no_call_tail
    if fam.first_strip and out.startswith(fam.first_strip):
        out = out[len(fam.first_strip):]
    return out


# ---------------------------------------------------------------------------------------------------------------
# The families

def _xml_invoke(section_open: str, section_close: str, invoke: str, param: str, value: Callable[[Any], str],
                nl: str = "\n", ns: str = "") -> Callable[[list], str]:
    """``<section><invoke name="f"><parameter name="k">v</parameter></invoke></section>`` with a prefix ``ns`` on
    every element name (``steptml:``, ``atem:``, DSML's ``｜DSML｜``)."""

    def write(calls: list) -> str:
        parts = [section_open + nl]
        for name, args in calls:
            parts.append(f'<{ns}{invoke} name="{name}">{nl}')
            for k, v in args.items():
                parts.append(f'<{ns}{param} name="{k}">{value(v)}</{ns}{param}>{nl}')
            parts.append(f"</{ns}{invoke}>{nl}")
        parts.append(section_close)
        return "".join(parts)

    return write


def _dsml(block: str, bar: str) -> Callable[[list], str]:
    """DeepSeek V3.2 / V4 / V4.1: ``string="true"`` values are raw text, ``string="false"`` values are JSON."""
    t = f"｜DSML｜{bar}"

    def write(calls: list) -> str:
        parts = [f"\n\n<{t}{block}>\n"]
        for name, args in calls:
            parts.append(f'<{t}invoke name="{name}">\n')
            for k, v in args.items():
                s = "true" if isinstance(v, str) else "false"
                parts.append(f'<{t}parameter name="{k}" string="{s}">{raw_or_json(v)}</{t}parameter>\n')
            parts.append(f"</{t}invoke>\n")
        parts.append(f"</{t}{block}>")
        return "".join(parts)

    return write


NS = "]<]minimax[>["


def _m3_value(v: Any) -> str:
    if isinstance(v, dict):
        return "".join(f"{NS}<{k}>{_m3_value(x)}{NS}</{k}>" for k, x in v.items() if x is not None)
    if isinstance(v, list):
        return "".join(f"{NS}<item>{_m3_value(x)}{NS}</item>" for x in v if x is not None)
    return raw_or_json(v)


def _m3(calls: list) -> str:
    parts = [f"{NS}<tool_call>\n"]
    for name, args in calls:
        parts.append(f'{NS}<invoke name="{name}">\n')
        for k, v in args.items():
            if v is not None:  # the M3 writer leaves nulls out (its training data holds none)
                parts.append(f"{NS}<{k}>{_m3_value(v)}{NS}</{k}>\n")
        parts.append(f"{NS}</invoke>\n")
    parts.append(f"{NS}</tool_call>")
    return "".join(parts)


def _k3_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _k3_attr(s: str) -> str:
    return s.replace("&", "&amp;").replace('"', "&quot;")


def _k3(calls: list) -> str:
    parts = ["<|close|>response<|sep|><|open|>tools<|sep|>"]
    for i, (name, args) in enumerate(calls, start=1):
        parts.append(f'<|open|>call tool="{_k3_attr(name)}" index="{i}"<|sep|>')
        for k, v in args.items():
            parts.append(f'<|open|>argument key="{_k3_attr(k)}" type="{_k3_type(v)}"<|sep|>{raw_or_json(v)}'
                         "<|close|>argument<|sep|>")
        parts.append("<|close|>call<|sep|>")
    parts.append("<|close|>tools<|sep|><|close|>message<|sep|>")
    return "".join(parts)


def _brace_value(v: Any, q: str) -> str:
    """Gemma 4 / FunctionGemma: strings between a quote token, keys bare, JSON literals as they are."""
    if isinstance(v, str):
        return f"{q}{v}{q}"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_brace_value(x, q)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_brace_value(x, q) for x in v) + "]"
    return json_value(v)


def _brace(open_: str, close: str, q: str) -> Callable[[list], str]:
    return lambda calls: "".join(f"{open_}call:{n}{_brace_value(a, q)}{close}" for n, a in calls)


def _kv_tags(section: tuple[str, str], call: tuple[str, str], key: tuple[str, str], val: tuple[str, str],
             sep: str = "") -> Callable[[list], str]:
    """``<section><call>NAME[sep]<key>k</key><val>v</val></call></section>`` (Hunyuan, K2-Horizon)."""

    def write(calls: list) -> str:
        body = "".join(call[0] + name + sep + "".join(f"{key[0]}{k}{key[1]}{val[0]}{raw_or_json(v)}{val[1]}"
                                                      for k, v in args.items()) + call[1] for name, args in calls)
        return section[0] + body + section[1]

    return write


def _seed(calls: list) -> str:
    out = ""
    for name, args in calls:
        out += "\n<seed:tool_call>\n<function=" + name + ">\n"
        out += "".join(f"<parameter={k}>{python_str(v)}</parameter>\n" for k, v in args.items())
        out += "</function>\n</seed:tool_call>"
    return out


def _minicpm5(calls: list) -> str:
    return "\n".join(f'<function name="{n}">' + "".join(f'<param name="{k}">{raw_or_json(v)}</param>'
                                                         for k, v in a.items()) + "</function>" for n, a in calls)


def _glimmer(calls: list) -> str:
    return "".join(f"<|start|>assistant to={n}.{n}<|message|><atem:function_calls>\n<atem:invoke name=\"{n}\">\n"
                   + "".join(f'<atem:parameter name="{k}">{raw_or_json(v)}</atem:parameter>\n' for k, v in a.items())
                   + "</atem:invoke>\n</atem:function_calls><|eom|>" for n, a in calls)


PLAMO = "<|plamo:{}:plamo|>"


def _plamo(calls: list) -> str:
    body = "".join(PLAMO.format("begin_tool_request") + PLAMO.format("begin_tool_name") + n
                   + PLAMO.format("end_tool_name") + PLAMO.format("begin_tool_arguments")
                   + "<|plamo:constrain|>json<|plamo:msg|>" + args_json(a) + PLAMO.format("end_tool_arguments")
                   + PLAMO.format("end_tool_request") for n, a in calls)
    return PLAMO.format("begin_tool_requests") + body + PLAMO.format("end_tool_requests")


def _command_a(calls: list) -> str:
    items = ",\n".join(f'    {{"tool_call_id": "{i}", "tool_name": "{n}", "parameters": {args_json(a)}}}'
                       for i, (n, a) in enumerate(calls))
    return "<|START_ACTION|>[\n" + items + "\n]<|END_ACTION|>"


def _llama31_scenarios() -> list[dict]:
    tools = [_fn("brave_search", "Web search (built-in).", {"query": {"type": "string"}}, ["query"]),
             _fn("wolfram_alpha", "Wolfram Alpha (built-in).", {"query": {"type": "string"}}, ["query"])]
    return [
        {"name": "brave-search", "raw": '<|python_tag|>brave_search.call(query="Stockholm weather")', "tools": tools,
             "calls": [("brave_search", {"query": "Stockholm weather"})], "tags": ["single-call"]},
        {"name": "wolfram-alpha", "raw": '<|python_tag|>wolfram_alpha.call(query="solve x^3 - 4x^2 + 6x - 24 = 0")',
             "tools": tools, "calls": [("wolfram_alpha", {"query": "solve x^3 - 4x^2 + 6x - 24 = 0"})],
             "tags": ["single-call"]},
        {"name": "escaped-quote", "raw": '<|python_tag|>brave_search.call(query="\\"tool refiner\\" paper")',
             "tools": tools, "calls": [("brave_search", {"query": '"tool refiner" paper'})],
             "tags": ["single-call", "string-escapes"]},
        {"name": "prose", "raw": "Stockholm is the capital of Sweden.", "tools": tools, "calls": [], "tags": ["no-call"],
             "content": "Stockholm is the capital of Sweden."},
        {"name": "cut-in-value", "raw": '<|python_tag|>brave_search.call(query="Stock', "tools": tools, "cut": True,
             "tags": ["truncated"]},
    ]


FAMILIES: list[Family] = [
    Family("dsml-v32", ["deepseek-ai/DeepSeek-V3.2"],
           [VLLM + "vllm/tool_parsers/deepseekv32_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/deepseekv32_detector.py",
            LLAMACPP + "models/templates/DeepSeek-V3.2.jinja"],
           ["｜DSML｜", "<think>", "</think>"], _dsml("function_calls", ""),
           reasoning=lambda r: f"{r}</think>", closer="</｜DSML｜function_calls>",
           junk="<｜DSML｜function_calls>\nnah uhg\n</｜DSML｜function_calls>",
           notes="Thinking mode pre-fills <think>: the completion starts inside the reasoning and closes it."),
    Family("dsml-v4", ["deepseek-ai/DeepSeek-V4-Flash"],
           [VLLM + "vllm/tool_parsers/deepseekv4_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/deepseekv4_detector.py"],
           ["｜DSML｜", "<think>", "</think>"], _dsml("tool_calls", ""),
           reasoning=lambda r: f"{r}</think>", closer="</｜DSML｜tool_calls>",
           junk="<｜DSML｜tool_calls>\nnah uhg\n</｜DSML｜tool_calls>"),
    Family("dsml-v41", ["deepseek-ai/DeepSeek-V4.1-Flash"],
           [SGLANG + "python/sglang/srt/function_call/deepseekv41_detector.py",
            VLLM + "vllm/tool_parsers/deepseekv41_engine_tool_parser.py"],
           ["｜DSML｜", "<think>", "</think>"], _dsml("calls", " "),
           reasoning=lambda r: f"{r}</think>", closer="</｜DSML｜ calls>",
           junk="<｜DSML｜ calls>\nnah uhg\n</｜DSML｜ calls>",
           notes="V4.1 writes a space after the bar and names the block ' calls' (encoding_v41's tool header)."),
    Family("minimax-m2", ["MiniMaxAI/MiniMax-M2"],
           [VLLM + "vllm/tool_parsers/minimax_m2_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/minimax_m2.py",
            LLAMACPP + "models/templates/unsloth-MiniMax-M2.jinja"],
           ["<minimax:tool_call>", "</minimax:tool_call>", "<invoke", "</invoke>", "<parameter", "</parameter>",
            "<think>", "</think>"],
           _xml_invoke("<minimax:tool_call>", "</minimax:tool_call>", "invoke", "parameter", raw_or_json),
           reasoning=lambda r: f"<think>\n{r}\n</think>\n\n", joiner="\n", closer="</minimax:tool_call>",
           junk="<minimax:tool_call>\nnah uhg\n</minimax:tool_call>"),
    Family("minimax-m3", ["MiniMaxAI/MiniMax-M3"],
           [VLLM + "vllm/tool_parsers/minimax_m3_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/minimax_m3.py",
            SGLANG + "python/sglang/srt/function_call/_llm_nom/m3_text.py"],
           [NS, "<tool_call>", "</tool_call>", "<invoke", "</invoke>", "<mm:think>", "</mm:think>"], _m3,
           reasoning=lambda r: f"<mm:think>{r}</mm:think>", joiner="\n", closer=f"{NS}</tool_call>",
           junk=f"{NS}<tool_call>\nnah uhg\n{NS}</tool_call>",
           notes="Every tag follows the namespace token; one element per argument; objects nest, lists are <item> "
                 "elements; the writer leaves null values out, so the typed row has no assignee."),
    Family("kimi-k3", ["moonshotai/Kimi-K3"],
           [VLLM + "vllm/tool_parsers/kimi_k3_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/kimik3_detector.py",
            SGLANG + "python/sglang/srt/function_call/kimik3_format.py",
            LLAMACPP + "models/templates/Kimi-K3.jinja"],
           ["<|open|>", "<|close|>", "<|sep|>"], _k3,
           reasoning=lambda r: f"{r}<|close|>think<|sep|><|open|>response<|sep|>",
           no_call_tail="<|close|>response<|sep|><|close|>message<|sep|>",
           closer="<|close|>tools<|sep|><|close|>message<|sep|>",
           junk="<|close|>response<|sep|><|open|>tools<|sep|>nah uhg<|close|>tools<|sep|>",
           notes="The generation prompt opens the think channel (thinking) or the response channel (no thinking); "
                 "rows without reasoning start inside the response channel."),
    Family("gemma4", ["google/gemma-4-31B-it"],
           [VLLM + "vllm/tool_parsers/gemma4_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/gemma4_detector.py",
            LLAMACPP + "models/templates/gemma4.jinja"],
           ["<|tool_call>", "<tool_call|>", '<|"|>', "<|channel>", "<channel|>"], _brace("<|tool_call>", "<tool_call|>", '<|"|>'),
           reasoning=lambda r: f"<|channel>thought\n{r}\n<channel|>", closer="<tool_call|>",
           junk="<|tool_call>nah uhg<tool_call|>"),
    Family("functiongemma", ["google/functiongemma-270m-it"],
           [VLLM + "vllm/tool_parsers/functiongemma_tool_parser.py"],
           ["<start_function_call>", "<end_function_call>", "<escape>"],
           _brace("<start_function_call>", "<end_function_call>", "<escape>"), closer="<end_function_call>",
           junk="<start_function_call>nah uhg<end_function_call>"),
    Family("step3", ["stepfun-ai/step3"],
           [VLLM + "vllm/tool_parsers/step3_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/step3_detector.py"],
           ["<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>", "<｜tool_call_end｜>",
            "<｜tool_sep｜>", "steptml:", "<think>", "</think>"],
           lambda calls: "<｜tool_calls_begin｜>" + "".join(
               "<｜tool_call_begin｜>function<｜tool_sep｜>"
               + _xml_invoke("", "", "invoke", "parameter", raw_or_json, nl="", ns="steptml:")([c])
               + "<｜tool_call_end｜>" for c in calls) + "<｜tool_calls_end｜>",
           reasoning=lambda r: f"<think>{r}</think>", closer="<｜tool_calls_end｜>",
           junk="<｜tool_calls_begin｜>nah uhg<｜tool_calls_end｜>",
           notes="vLLM's step3 parser reads values with [^<]*: nested values are written as JSON text."),
    Family("dots", ["rednote-hilab/dots.llm1.inst"],
           [VLLM + "vllm/tool_parsers/dots_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/dots_detector.py"],
           ["<dots_function_call>", "</dots_function_call>", "<invoke", "</invoke>", "<parameter", "</parameter>"],
           _xml_invoke("<dots_function_call>", "</dots_function_call>", "invoke", "parameter", raw_or_json),
           joiner="\n", closer="</dots_function_call>", junk="<dots_function_call>\nnah uhg\n</dots_function_call>",
           notes="No reasoning rows: the parsers name no reasoning markers."),
    Family("minicpm5", ["openbmb/MiniCPM5"],
           [VLLM + "vllm/tool_parsers/minicpm5xml_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/minicpm5_detector.py"],
           ["<function", "</function>", "<param", "</param>", "<think>", "</think>"], _minicpm5,
           reasoning=lambda r: f"<think>\n{r}\n</think>\n", joiner="\n", closer="</function>",
           junk="<function>nah uhg</function>"),
    Family("muse-glimmer", ["muse/MuseGlimmer"],
           [VLLM + "vllm/tool_parsers/muse_glimmer_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/muse_glimmer_detector.py"],
           ["<|start|>", "<|message|>", "<|eom|>", "<|eot|>", "atem:", "to=self", "to=user"], _glimmer,
           reasoning=lambda r: f" to=self<|message|>{r}<|eom|>",
           content=lambda t: f"<|start|>assistant to=user<|message|>{t}<|eot|>",
           content_then_calls=lambda t: f"<|start|>assistant to=user<|message|>{t}<|eom|>",
           first_strip="<|start|>assistant",
           closer="<|eom|>", junk="<|start|>assistant to=get_weather.get_weather<|message|><atem:function_calls>nah "
                                  "uhg</atem:function_calls><|eom|>",
           notes="Channel-scoped messages; the template renders a bare tool name as the recipient 'f.*' and the model "
                 "writes 'f.f', which vLLM maps back to 'f'. Content written before a call is its own to=user message; "
                 "the expected parse follows the schema for values that also decode as JSON."),
    Family("hunyuan-v3", ["tencent/Hunyuan-HY-v3"],
           [VLLM + "vllm/tool_parsers/hy_v3_tool_parser.py"],
           ["<tool_calls>", "</tool_calls>", "<tool_call>", "</tool_call>", "<tool_sep>", "<arg_key>", "</arg_key>",
            "<arg_value>", "</arg_value>", "<think>", "</think>"],
           _kv_tags(("<tool_calls>", "</tool_calls>"), ("<tool_call>", "</tool_call>"), ("<arg_key>", "</arg_key>"),
                    ("<arg_value>", "</arg_value>"), sep="<tool_sep>"),
           reasoning=lambda r: f"<think>{r}</think>", joiner="\n", closer="</tool_calls>",
           junk="<tool_calls><tool_call>nah uhg</tool_call></tool_calls>",
           notes="Reasoning markers <think></think> are taken from the v4 parser's structural-token pattern."),
    Family("hunyuan-v4", ["tencent/Hunyuan-HY-v4"],
           [VLLM + "vllm/tool_parsers/hy_v4_tool_parser.py"],
           ["<tool_calls:6124c78e>", "</tool_calls:6124c78e>", "<tool_call:6124c78e>", "</tool_call:6124c78e>",
            "<arg_key:6124c78e>", "</arg_key:6124c78e>", "<arg_value:6124c78e>", "</arg_value:6124c78e>",
            "<think:6124c78e>", "</think:6124c78e>"],
           _kv_tags(("<tool_calls:6124c78e>", "</tool_calls:6124c78e>"),
                    ("<tool_call:6124c78e>", "</tool_call:6124c78e>"), ("<arg_key:6124c78e>", "</arg_key:6124c78e>"),
                    ("<arg_value:6124c78e>", "</arg_value:6124c78e>")),
           reasoning=lambda r: f"<think:6124c78e>{r}</think:6124c78e>", joiner="\n",
           closer="</tool_calls:6124c78e>",
           junk="<tool_calls:6124c78e><tool_call:6124c78e>nah uhg</tool_call:6124c78e></tool_calls:6124c78e>",
           notes="Every structural tag carries the checkpoint's suffix (':6124c78e' is the example the parser names); "
                 "v4 has no <tool_sep>: the name runs to the first <arg_key>."),
    Family("k2-horizon", ["k2-horizon/K2-Horizon"],
           [VLLM + "vllm/tool_parsers/k2_horizon_tool_parser.py"],
           ["<ifm|tool_calls>", "</ifm|tool_calls>", "<ifm|tool_call>", "</ifm|tool_call>", "<ifm|arg_key>",
            "</ifm|arg_key>", "<ifm|arg_value>", "</ifm|arg_value>"],
           _kv_tags(("<ifm|tool_calls>", "</ifm|tool_calls>"), ("<ifm|tool_call>", "</ifm|tool_call>"),
                    ("<ifm|arg_key>", "</ifm|arg_key>"), ("<ifm|arg_value>", "</ifm|arg_value>")),
           joiner="\n", closer="</ifm|tool_calls>",
           junk="<ifm|tool_calls><ifm|tool_call>nah uhg</ifm|tool_call></ifm|tool_calls>",
           notes="The default 'xml' tool_call_format; no reasoning rows (markers not found in the parser)."),
    Family("apertus", ["swiss-ai/Apertus-8B-Instruct-2509"],
           [VLLM + "vllm/tool_parsers/apertus_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/apertus2509_detector.py"],
           ["<|tools_prefix|>", "<|tools_suffix|>"],
           lambda calls: "<|tools_prefix|>" + json.dumps([{n: a} for n, a in calls], ensure_ascii=False)
           + "<|tools_suffix|>", joiner=" ", closer="<|tools_suffix|>",
           junk="<|tools_prefix|>nah uhg<|tools_suffix|>",
           notes="No reasoning rows (the parser names no reasoning markers)."),
    Family("functionary-v32", ["meetkai/functionary-medium-v3.2"],
           [LLAMACPP + "tests/test-chat.cpp", LLAMACPP + "common/chat.cpp"],
           [">>>"],
           lambda calls: "".join(f">>>{n}\n{args_json(a)}" for n, a in calls),
           content=lambda t: f">>>all\n{t}", closer=None, junk=None,
           notes="Recipient-based: '>>>all' carries text, '>>>NAME' a call with its JSON arguments (llama.cpp's "
                 "peg test). Calls follow each other with no separator; that spacing is not confirmed by a test."),
    Family("plamo3", ["pfnet/plamo-3-8b-instruct"],
           [VLLM + "vllm/tool_parsers/plamo3_tool_parser.py", VLLM + "vllm/reasoning/plamo3_reasoning_parser.py"],
           ["<|plamo:"], _plamo,
           reasoning=lambda r: PLAMO.format("begin_think") + r + PLAMO.format("end_think"),
           closer=PLAMO.format("end_tool_requests"),
           junk=PLAMO.format("begin_tool_requests") + "nah uhg" + PLAMO.format("end_tool_requests")),
    Family("llama31-builtin", ["meta-llama/Llama-3.1-8B-Instruct"],
           ["https://www.llama.com/docs/model-cards-and-prompt-formats/llama3_1/",
            VLLM + "vllm/tool_parsers/llama_tool_parser.py"],
           ["<|python_tag|>", "<|eom_id|>"], lambda calls: "", scenarios=_llama31_scenarios, parallel=False,
           notes="Built-in tools only (brave_search, wolfram_alpha): one call per answer."),
    Family("command-a", ["CohereLabs/c4ai-command-a-03-2025"],
           [SGLANG + "python/sglang/srt/function_call/cohere_command4_detector.py",
            VLLM + "vllm/tool_parsers/cohere_command_tool_parser.py",
            LLAMACPP + "models/templates/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"],
           ["<|START_ACTION|>", "<|END_ACTION|>", "<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>",
            "<|END_RESPONSE|>"], _command_a,
           reasoning=lambda r: f"<|START_THINKING|>{r}<|END_THINKING|>",
           content=lambda t: f"<|START_RESPONSE|>{t}<|END_RESPONSE|>", closer="<|END_ACTION|>", text_before=False,
           junk="<|START_ACTION|>nah uhg<|END_ACTION|>"),
    Family("seed-oss", ["ByteDance-Seed/Seed-OSS-36B-Instruct"],
           [LLAMACPP + "models/templates/ByteDance-Seed-OSS.jinja", VLLM + "vllm/tool_parsers/seed_oss_tool_parser.py"],
           ["<seed:tool_call>", "</seed:tool_call>", "<function=", "</function>", "<parameter=", "</parameter>",
            "<seed:think>", "</seed:think>"], _seed,
           reasoning=lambda r: f"<seed:think>{r}</seed:think>", content=lambda t: f"\n{t}\n",
           closer="</seed:tool_call>", junk="\n<seed:tool_call>\nnah uhg\n</seed:tool_call>",
           notes="The template writes non-string values with Jinja's '| string' (Python's str: True, None, "
                 "{'a': 1}); vLLM's parser reads them back by the schema (ast.literal_eval for objects)."),
    Family("longcat", ["meituan-longcat/LongCat-Flash-Chat"],
           [VLLM + "vllm/tool_parsers/longcat_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/longcat_detector.py"],
           ["<longcat_tool_call>", "</longcat_tool_call>"],
           lambda calls: "\n".join(f'<longcat_tool_call>\n{{"name": "{n}", "arguments": {args_json(a)}}}\n'
                                   "</longcat_tool_call>" for n, a in calls),
           joiner="\n", closer="</longcat_tool_call>", junk="<longcat_tool_call>nah uhg</longcat_tool_call>",
           notes="Hermes layout behind LongCat's own tags (LongCat-Flash-Chat: vLLM's first parser, SGLang's); newer "
                 "checkpoints write GLM's layout in LongCat's tags (the x-kv-variant rows). No reasoning rows (markers "
                 "not verified)."),
    Family("gigachat3", ["ai-sage/GigaChat3-10B-A1.8B"],
           [VLLM + "vllm/tool_parsers/gigachat3_tool_parser.py",
            SGLANG + "python/sglang/srt/function_call/gigachat3_detector.py",
            LLAMACPP + "models/templates/GigaChat3-10B-A1.8B.jinja"],
           ["<|role_sep|>", "<|message_sep|>", "function call"],
           lambda calls: "".join(f'function call<|role_sep|>\n{{"name": "{n}", "arguments": {args_json(a)}}}'
                                 for n, a in calls),
           joiner="<|message_sep|>\n\n", parallel=False, closer=None, junk="function call<|role_sep|>\nnah uhg",
           notes="One call per answer (both parsers read one)."),
    Family("inkling", ["inkling/Inkling"],
           [SGLANG + "python/sglang/srt/function_call/inkling_detector.py",
            VLLM + "vllm/tool_parsers/inkling_tool_parser.py"],
           ["<|message_model|>", "<|content_invoke_tool_json|>", "<|end_message|>"],
           lambda calls: "".join(f"<|message_model|>{n}<|content_invoke_tool_json|>"
                                 + json.dumps({"name": n, "args": a}, ensure_ascii=False, separators=(",", ":"))
                                 + "<|end_message|>" for n, a in calls),
           closer="<|end_message|>", junk="<|message_model|>x<|content_invoke_tool_json|>nah uhg<|end_message|>",
           notes="How Inkling writes plain text before a call is not in the detector; the text-before row puts the "
                 "text first with no marker of its own (the detector strips Inkling's control tokens from it)."),
]


# ---------------------------------------------------------------------------------------------------------------
# Rows

def _calls(calls: list[tuple[str, dict]]) -> list[dict]:
    return [{"name": n, "arguments": a} for n, a in calls]


def _drop_nulls(calls: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    return [(n, {k: v for k, v in a.items() if v is not None}) for n, a in calls]


def _scenarios(fam: Family) -> list[dict]:
    if fam.scenarios is not None:
        return fam.scenarios()
    typed = _drop_nulls(TYPED) if fam.slug == "minimax-m3" else TYPED
    rows = [
        {"name": "single", "calls": SINGLE, "tags": ["single-call"]},
        {"name": "nested", "calls": NESTED, "tags": ["single-call", "nested-json"]},
        {"name": "typed-values", "calls": typed, "tags": ["single-call", "numeric-arguments", "nested-json"]},
        {"name": "strings-that-look-typed", "calls": LOOKS_TYPED, "tags": ["single-call", "x-string-looks-typed"]},
        {"name": "no-arguments", "calls": NO_ARGS, "tags": ["single-call", "empty-arguments"]},
        {"name": "prose-only", "calls": [], "content": PROSE, "tags": ["no-call"]},
    ]
    if fam.text_before:
        rows.append({"name": "text-before-call", "calls": SINGLE, "content": BEFORE, "tags": ["single-call", "text-before-call"]})
    if fam.parallel:
        rows.append({"name": "parallel", "calls": PARALLEL, "tags": ["parallel-calls"]})
    if fam.reasoning is not None:
        rows.append({"name": "reasoning-then-call", "calls": SINGLE, "reasoning": REASONING,
                         "tags": ["single-call", "reasoning"]})
        rows.append({"name": "reasoning-then-prose", "calls": [], "reasoning": REASONING, "content": PROSE,
                         "tags": ["no-call", "reasoning"]})
    single = compose(fam, SINGLE)
    cut = single[: single.rfind("Paris") + 3]
    rows.append({"name": "cut-in-value", "raw": cut, "cut": True, "tags": ["truncated"]})
    if fam.parallel:
        par = compose(fam, PARALLEL)
        rows.append({"name": "cut-in-second-call", "raw": par[: par.rfind("Tokyo") + 2], "calls": PARALLEL[:1],
                         "tags": ["truncated", "parallel-calls"],
                         "notes": "The first call is whole: it is kept; the call the text stops in is left out."})
    if fam.closer and single.endswith(fam.closer):
        rows.append({"name": "lost-closer", "raw": single[: -len(fam.closer)], "calls": SINGLE, "tags": ["malformed"],
                         "notes": "The call is whole; only the section's closing marker is missing."})
    if fam.junk:
        rows.append({"name": "junk-between-markers", "raw": fam.junk, "calls": [], "tags": ["malformed", "no-call"],
                         "notes": "Text that is not a call between the call markers is not a call."})
    return rows


def make_rows(fam: Family) -> list[dict]:
    out = []
    for sc in _scenarios(fam):
        calls = sc.get("calls", [])
        raw = sc.get("raw")
        if raw is None:
            raw = compose(fam, calls, reasoning=sc.get("reasoning"), content=sc.get("content"))
        row: dict[str, Any] = {
            "id": f"{fam.slug}/{sc['name']}",
            "family": fam.slug,
            "models": fam.models,
            "spec_version": "0.1",
            "provenance": {"kind": sc.get("kind", "hand"), "source_url": fam.sources[0], "revision": "main",
                           "license": "Apache-2.0", "generator": GENERATOR},
            "tools": sc.get("tools", TOOLS),
            "raw_output": raw,
        }
        if sc.get("cut") and not calls:
            row["expected_error"] = {"reason": "cut by max_tokens inside the only call's value",
                                     "accept": ["no_tool_calls", "content_passthrough"]}
        else:
            content = sc.get("content") if fam.reasoning is not None or not sc.get("reasoning") else None
            reasoning = sc.get("reasoning") if fam.reasoning is not None else None
            row["expected"] = {"content": content, "reasoning_content": reasoning, "tool_calls": _calls(calls)}
        row["tags"] = sc["tags"]
        note = " ".join(x for x in (sc.get("notes", ""), fam.notes) if x)
        if note:
            row["notes"] = note
        out.append(row)
    return out + fam.extra


# Rows copied verbatim from an engine's tests or a public report (family, id, raw, calls, tools, provenance, tags).
COPIED: list[dict] = [
    {"family": "functionary-v32", "name": "llamacpp-peg-call", "raw": '>>>special_function\n{"arg1": 1}',
         "tools": [_fn("special_function", "test", {"arg1": {"type": "integer"}}, ["arg1"])],
         "calls": [("special_function", {"arg1": 1})], "kind": "engine_test",
         "url": LLAMACPP + "tests/test-chat.cpp", "tags": ["single-call"]},
    {"family": "functionary-v32", "name": "llamacpp-peg-text", "raw": ">>>all\nHello, world!\nWhat's up?",
         "tools": [_fn("special_function", "test", {"arg1": {"type": "integer"}}, ["arg1"])], "calls": [],
         "content": "Hello, world!\nWhat's up?", "kind": "engine_test", "url": LLAMACPP + "tests/test-chat.cpp",
         "tags": ["no-call"]},
    {"family": "command-a", "name": "transformers-cohere-schema",
         "raw": '<|START_THINKING|>I should call a tool.<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", '
             '"tool_name": "simple_tool", "parameters": {"temperature_format": "Celsius"}}\n]<|END_ACTION|>',
         "tools": [_fn("simple_tool", "test", {"temperature_format": {"type": "string"}})],
         "calls": [("simple_tool", {"temperature_format": "Celsius"})], "reasoning": "I should call a tool.",
         "kind": "engine_test", "url": "https://github.com/huggingface/transformers/blob/main/tests/utils/"
                                 "test_chat_parsing_utils.py", "tags": ["single-call", "reasoning"]},
    {"family": "apertus", "name": "vllm-docstring",
         "raw": 'I will check. <|tools_prefix|>[{"get_weather": {"city": "Paris"}}]<|tools_suffix|>',
         "tools": TOOLS, "calls": [("get_weather", {"city": "Paris"})], "content": "I will check.", "kind": "engine_test",
         "url": VLLM + "vllm/tool_parsers/apertus_tool_parser.py", "tags": ["single-call", "text-before-call"]},
    {"family": "minimax-m3", "name": "sglang-docstring-nested",
         "raw": f'{NS}<tool_call>\n{NS}<invoke name="func1">{NS}<p1>value1{NS}</p1>{NS}<p2>{NS}<item>{NS}<k>val{NS}</k>'
             f'{NS}</item>{NS}</p2>{NS}</invoke>\n{NS}</tool_call>',
         "tools": [_fn("func1", "test", {"p1": {"type": "string"},
                                      "p2": {"type": "array", "items": {"type": "object",
                                                                        "properties": {"k": {"type": "string"}}}}})],
         "calls": [("func1", {"p1": "value1", "p2": [{"k": "val"}]})], "kind": "engine_test",
         "url": SGLANG + "python/sglang/srt/function_call/_llm_nom/m3_text.py", "tags": ["single-call", "nested-json"]},
    {"family": "minimax-m3", "name": "leak-two-invokes",
         "raw": f'{NS}<tool_call>\n{NS}<invoke name="list_supplier_invoices">{NS}<status>paid{NS}</status>{NS}</invoke>\n'
             f'{NS}<invoke name="list_events">{NS}<limit>10{NS}</limit>{NS}</invoke>\n{NS}</tool_call>',
         "tools": [_fn("list_supplier_invoices", "t", {"status": {"type": "string"}}),
                _fn("list_events", "t", {"limit": {"type": "integer"}})],
         "calls": [("list_supplier_invoices", {"status": "paid"}), ("list_events", {"limit": 10})], "kind": "bug_report",
         "url": "https://github.com/search?q=%5D%3C%5Dminimax%5B%3E%5B%3Cinvoke&type=code",
         "tags": ["parallel-calls", "regression"],
         "notes": "A MiniMax-M3 output leaked as text in a public application's test (its oracle), shortened to two "
               "of its invokes."},
    {"family": "longcat", "name": "kv-variant-read-file",
     "raw": "<longcat_tool_call>read_file\n<longcat_arg_key>path</longcat_arg_key>\n<longcat_arg_value>main.py"
            "</longcat_arg_value>\n<longcat_arg_key>start</longcat_arg_key>\n<longcat_arg_value>0</longcat_arg_value>"
            "\n<longcat_arg_key>max_chars</longcat_arg_key>\n<longcat_arg_value>24000</longcat_arg_value>\n"
            "</longcat_tool_call>",
     "tools": [_fn("read_file", "t", {"path": {"type": "string"}, "start": {"type": "integer"},
                                      "max_chars": {"type": "integer"}})],
     "calls": [("read_file", {"path": "main.py", "start": 0, "max_chars": 24000})], "kind": "bug_report",
     "url": "https://github.com/search?q=%3Clongcat_arg_key%3E&type=code", "tags": ["single-call", "x-kv-variant"],
     "notes": "The tag-pair layout newer LongCat checkpoints write (GLM's layout in LongCat's tags), as a public "
              "application's prompt spells it out; vLLM's first LongCat parser and SGLang's read the JSON layout."},
    {"family": "longcat", "name": "kv-variant-two-calls",
     "raw": "<longcat_tool_call>get_weather\n<longcat_arg_key>city</longcat_arg_key>\n<longcat_arg_value>Paris"
            "</longcat_arg_value>\n</longcat_tool_call>\n<longcat_tool_call>get_weather\n<longcat_arg_key>city"
            "</longcat_arg_key>\n<longcat_arg_value>Tokyo</longcat_arg_value>\n<longcat_arg_key>days"
            "</longcat_arg_key>\n<longcat_arg_value>3</longcat_arg_value>\n</longcat_tool_call>",
     "tools": TOOLS, "calls": PARALLEL, "kind": "hand", "url": "https://github.com/search?q=%3Clongcat_arg_key%3E&type=code",
     "tags": ["parallel-calls", "x-kv-variant"], "notes": "The tag-pair layout, two calls."},
    {"family": "kimi-k3", "name": "sglang-docstring",
         "raw": '<|open|>response<|sep|>text<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="name" '
             'index="1"<|sep|><|open|>argument key="k" type="string"<|sep|>raw text<|close|>argument<|sep|>'
             "<|close|>call<|sep|><|close|>tools<|sep|>",
         "tools": [_fn("name", "t", {"k": {"type": "string"}})], "calls": [("name", {"k": "raw text"})], "content": "text",
         "kind": "engine_test", "url": SGLANG + "python/sglang/srt/function_call/kimik3_detector.py",
         "tags": ["single-call", "text-before-call"]},
]


def copied_rows() -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = {}
    fams = {f.slug: f for f in FAMILIES}
    for c in COPIED:
        fam = fams[c["family"]]
        row = {"id": f"{fam.slug}/{c['name']}", "family": fam.slug, "models": fam.models, "spec_version": "0.1",
               "provenance": {"kind": c["kind"], "source_url": c["url"], "revision": "main",
                              "license": "Apache-2.0" if c["kind"] == "engine_test" else "NOASSERTION"},
               "tools": c["tools"], "raw_output": c["raw"],
               "expected": {"content": c.get("content"), "reasoning_content": c.get("reasoning"),
                            "tool_calls": _calls(c["calls"])},
               "tags": c["tags"]}
        if c.get("notes"):
            row["notes"] = c["notes"]
        by.setdefault(fam.slug, []).append(row)
    return by


def family_records() -> dict[str, dict]:
    """Each family in canitoolcall's ``family.json`` shape (the leak check reads ``markers``), plus ``sources``."""
    return {f.slug: {"slug": f.slug, "name": f.slug, "spec_version": "0.1", "has_reasoning": f.reasoning is not None,
                     "markers": f.markers, "reference_models": [{"repo": m, "revision": "main"} for m in f.models],
                     "format_notes": "tests/corpus/families/README.md", "notes": f.notes, "sources": f.sources}
            for f in FAMILIES}


def main() -> None:
    (HERE / "families.json").write_text(json.dumps(family_records(), ensure_ascii=False, indent=1) + "\n",
                                        encoding="utf-8")
    copied = copied_rows()
    for fam in FAMILIES:
        rows = make_rows(fam) + copied.get(fam.slug, [])
        ids = [r["id"] for r in rows]
        assert len(ids) == len(set(ids)), fam.slug
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        (HERE / f"{fam.slug}.jsonl").write_text(text, encoding="utf-8")
        print(f"{fam.slug}: {len(rows)} rows")


if __name__ == "__main__":
    main()
