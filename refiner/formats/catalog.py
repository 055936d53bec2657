"""Every wire format the refiner knows, in one ordered table: :data:`CATALOG`. Each entry is a
:class:`~refiner.formats.family.Row`, a plain value: a family (its :class:`~refiner.formats.family.Family`: name, shape,
the models it serves, where it was read from), the grammar that reads and writes it, and the grammar's spelling
(``None`` for a grammar that one family alone writes). Detection tries the rows in the table's order: a format's rank is
its place here, so a more specific spelling goes before a more general one sharing its markers. Adding a family that an
existing grammar holds is one more row; importing :mod:`refiner.formats` registers the table
(:func:`~refiner.formats.family.register_catalog`)."""

from __future__ import annotations

from dataclasses import replace

from refiner.formats import (
    chat_api,
    functionary_v31,
    glaive,
    glm45,
    harmony,
    kimi_k3,
    mistral,
    nestful,
    order,
    qwen3_coder,
    telechat4,
)
from refiner.formats.base import NAME_PATTERN, SPACED_NAME_PATTERN
from refiner.formats.brace_kv import BraceKV, BraceSpelling
from refiner.formats.family import Family, Row, register_catalog
from refiner.formats.json_calls import JsonCalls, JsonSpelling, QuotedJsonCalls
from refiner.formats.minimax_m3 import NsXml, NsXmlSpelling
from refiner.formats.named_json import NamedJson, NamedSpelling
from refiner.formats.pythonic_sentinels import CallLines, SentinelPythonic, Wrapper
from refiner.formats.xml_grammar import XmlParams
from refiner.formats.xml_spelling import XmlSpelling, dsml, invoke, kv

VLLM = "vllm-project/vllm vllm/tool_parsers/"
VLLM_OLD = "vllm-project/vllm vllm/entrypoints/openai/tool_parsers/"
VLLM_EXAMPLES = "vllm-project/vllm examples/"
SGLANG = "sgl-project/sglang python/sglang/srt/function_call/"
SGLANG_VNG = "vngcloud/sglang python/sglang/srt/function_call/"  # VNG Cloud's fork
LLAMA_CPP = "ggml-org/llama.cpp models/templates/"
LLAMA_CPP_PARSERS = "ggml-org/llama.cpp common/parsers/"
SHA_CHARS = 12  # the sha256 prefix that names a template


def llama_cpp_template(name: str, sha: str) -> str:
    """A source naming one of llama.cpp's public chat templates the row was checked against, by its sha256 prefix
    (``benchmarks/bench_public_templates.py`` derives the row from it)."""
    return f"{LLAMA_CPP}{name} (sha256 {sha})"


def _checked(*named: str) -> tuple[str, ...]:
    """:func:`llama_cpp_template` for each ``"FILE SHA"``."""
    return tuple(llama_cpp_template(*n.split()) for n in named)


def _plamo(tag: str) -> str:
    return f"<|plamo:{tag}:plamo|>"


# Llama 3.x: calls joined by "; ", optionally after the tag; the built-ins are NAME.call(...) after it.
PYTHON_TAG = "<|python_tag|>"
LLAMA3 = JsonSpelling(PYTHON_TAG, None, "joined", arg_keys=("parameters", "arguments"), between="; ", type_key="type",
                      builtins=("brave_search", "wolfram_alpha"))

# Mistral tokenizers v2-v7: one list after [TOOL_CALLS] (a space between; none in Tekken's), call ids read and dropped.
MISTRAL = JsonSpelling(mistral.BOT, None, "list", gap=" ", once=True, dropped=("id",), follows=("[",))
MISTRAL_TEKKEN = replace(MISTRAL, gap="", tight=True)

# DeepSeek V3 writes function<｜tool▁sep｜>NAME and its arguments in a json fence, calls a line apart; V3.1
# NAME<｜tool▁sep｜>{...}, back to back. Each reads the other's layout too.
CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
_V3 = NamedSpelling(CALLS_BEGIN, CALLS_END, CALL_BEGIN + "function" + SEP, "\n```json\n", "\n```" + CALL_END,
                    joiner="\n", loose=True, names=SPACED_NAME_PATTERN)
_V31 = NamedSpelling(CALLS_BEGIN, CALLS_END, CALL_BEGIN, SEP, CALL_END, loose=True, names=SPACED_NAME_PATTERN)
DEEPSEEK_V3, DEEPSEEK_V31 = replace(_V3, also=(_V31,)), replace(_V31, also=(_V3,))
# DeepSeek-Coder-V2 writes V3's tokens around a python fence holding NAME(...), positional arguments too, and reads
# V3's json fence too; its row goes before V3's, whose tokens it shares (the fence's word tells them apart).
DEEPSEEK_CODER_V2 = replace(_V3, name_close="\n```python\n", python_call=True, also=(_V3,))

# Kimi-K2: the call id is functions.NAME:INDEX; the singular <|tool_call_section_begin|> is read too.
KIMI_K2 = NamedSpelling("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>functions.",
                        "<|tool_call_argument_begin|>", "<|tool_call_end|>", counter=":", loose=True, names=NAME_PATTERN,
                        respelt=(("<|tool_call_section_begin|>", "<|tool_calls_section_begin|>"),
                                 ("<|tool_call_section_end|>", "<|tool_calls_section_end|>")))

# K2-Horizon's reasoning blocks, one per reasoning effort (high, medium, low)
K2_THINK = tuple((f"<ifm|{t}>", f"</ifm|{t}>") for t in ("think", "think_fast", "think_faster"))


# Where several entries share a marker, the order says which is tried first: Hunyuan's rows before the JSON rows sharing
# <tool_calls> (minimax, jamba) and before Qwen3-Coder and GLM (the rows whose <tool_call> and <arg_key> it wraps: their
# sniff needs the <tool_call> inside); Qwen3-Coder, SGLang's multi_format python layout (a pythonic call after the tag:
# GLM would take NAME() for a name), GLM, then TeleChat4 (a name then <param_key>; a name alone is GLM's),
# GLM-5.3-Flash's JSON form (a name then '>'), before apibank and hermes (<tool_call>); DeepSeek V3 before V3.1; MiniMax
# before Jamba (an object after <tool_calls> is MiniMax's line); ZAYA and IQuest after Qwen3-Coder and GLM, which keep
# the <function= and <arg_key> markers they share; Mistral's Tekken row before the spaced one (it reads strictly only a
# list right after [TOOL_CALLS], the spaced row any); GigaChat 3.1 before GigaChat 3 (whose row also reads 3.1's
# <|function_call|>). Functionary v3.1 before Qwen3-Coder (<function=: a JSON object after the name is Functionary's; a
# <function= neither sniff claims stays Qwen3-Coder's); SGLang's multi_format minimax layout before its dsv32 one (a
# call without parameters is the minimax one's, which refuses string=); LLM-jp's harmony before gpt-oss's (it reads a
# text only when a space follows its first token; gpt-oss's row reads those texts too).
CATALOG: tuple[Row, ...] = (
    Row(Family('nestools', 'NesTools: <nested function>[{"api_name", "parameters", "responses": ["API_call_0"]}]</nested '
               'function>', trained=True),
        JsonCalls, JsonSpelling("<nested function>", "</nested function>", "list", arg_keys=("parameters",),
                                name_key="api_name", respell=False, in_prose=True, outputs_key="responses")),
    Row(Family('order', 'Simplified order: <order_func>[{"step": 1, "tool_list": ["a", "b"]}, ...]</order_func>', trained=True),
        order.Order, None),
    Row(Family('toolace', '<function_list>[Func_Name(a="v", b=2), other(x=[1, 2])]</function_list> (pythonic, ToolACE)', trained=True),
        SentinelPythonic, Wrapper("<function_list>", "</function_list>", untagged=True)),
    # (raw xLAM writes the bare list; the tags are the refiner's, Tool-Use Refiner Appendix B.3)
    Row(Family('xlam', 'xLAM: <func_call>[{"name": ..., "arguments": {...}}, ...]</func_call>', trained=True),
        JsonCalls, JsonSpelling("<func_call>", "</func_call>", "list", respell=False, in_prose=True)),
    Row(
        Family("kimi_k3", 'Kimi K3 XTML: <|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|><|open|>argument '
               'key="KEY" type="string"<|sep|>VALUE<|close|>argument<|sep|>...<|close|>call<|sep|><|close|>tools<|sep|> '
               "(type=\"string\" raw, other types JSON)",
               models=("moonshotai/Kimi-K3",),
               sources=("sgl-project/sglang python/sglang/srt/function_call/kimik3_detector.py, kimik3_format.py",
                        "vllm-project/vllm vllm/tool_parsers/kimi_k3_tool_parser.py", LLAMA_CPP_PARSERS + "kimi-k3.cpp",
                        *_checked("Kimi-K3.jinja 4578103bf225")),
               reasoning=(("<|open|>think<|sep|>", "<|close|>think<|sep|>"),)),
        XmlParams, XmlSpelling(section_open="<|open|>tools<|sep|>", section_close="<|close|>tools<|sep|>",
                               call_open="<|open|>call ", call_close="<|close|>call<|sep|>", name_at="attr",
                               name_attr="tool", index_attr="index", key_open="<|open|>argument ", key_at="attr",
                               key_attr="key", value_close="<|close|>argument<|sep|>", tag_end="<|sep|>",
                               typing="named", type_attr="type", sep="", hook=kimi_k3.HOOK)),
    Row(
        Family("minimax_m3", "MiniMax-M3: ]<]minimax[>[ before every tag; <tool_call>, <invoke name=\"NAME\">, one "
               "<KEY>VALUE</KEY> element per argument, objects nested, lists as <item> elements",
               models=("MiniMaxAI/MiniMax-M3",),
               sources=(SGLANG + "minimax_m3.py, _llm_nom/m3_text.py, minimax_m3_nom.py",
                        "vllm-project/vllm vllm/tool_parsers/minimax_m3_tool_parser.py", LLAMA_CPP_PARSERS + "minimax-m3.cpp",
                        *_checked("MiniMax-M3.jinja 11421244f675")),
               reasoning=(("<mm:think>", "</mm:think>"),)),
        NsXml, NsXmlSpelling()),
    Row(
        Family("hunyuan_v4", "Hunyuan HY v4: <tool_calls:S><tool_call:S>NAME<arg_key:S>KEY</arg_key:S><arg_value:S>VALUE"
               "</arg_value:S></tool_call:S></tool_calls:S>, S a per-checkpoint suffix (any is read)",
               sources=(VLLM + "hy_v4_tool_parser.py",)),
        XmlParams, kv(section="tool_calls", name_sep="\n", sep="", suffix=":6124c78e")),
    Row(
        Family("hunyuan_v3", "Hunyuan HY v3: <tool_calls:S><tool_call:S>NAME<tool_sep:S><arg_key:S>KEY</arg_key:S>"
               "<arg_value:S>VALUE</arg_value:S></tool_call:S></tool_calls:S> (strings raw, other values JSON), S the "
               "tokenizer's token suffix (:opensource in the public checkpoint; any, or none, is read)",
               sources=(VLLM + "hy_v3_tool_parser.py (token_suffix from the tokenizer config)",
                        SGLANG + "hunyuan_detector.py (the suffixed tokens from the tokenizer's vocabulary)",
                        *_checked("tencent-Hy3.jinja 84437b974642"))),
        XmlParams, replace(kv(section="tool_calls", name_sep="<tool_sep>", sep="", suffix=":opensource"),
                           suffix_optional=True)),
    Row(Family('glaive', 'Glaive: <functioncall> {"name": ..., "arguments": \'{...}\'} <|endoftext|> per call', trained=True),
        glaive.Glaive, None),
    Row(
        Family("functionary_v31", "Functionary v3.1: <function=NAME>{...}</function> per call, the python tool's code "
               "after <|python_tag|> (after the calls; the tag alone is Llama 3.1's)",
               models=("meetkai/functionary-small-v3.1", "meetkai/functionary-medium-v3.1"),
               sources=("llama.cpp common/chat.cpp (functionary_v3_1_llama_3_1)",
                        VLLM_OLD + "llama_usr_defined_tool_parser.py (Llama 3.1's user-defined function format)",
                        *_checked("meetkai-functionary-medium-v3.1.jinja 2fc9dbfaea55"))),
        functionary_v31.FunctionaryV31, functionary_v31.SPELLING),
    Row(
        Family("qwen3_coder", "Qwen3-Coder XML: <tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n"
               "</function>\\n</tool_call> per call (strings raw, other values JSON)",
               models=("Qwen/Qwen3-Coder-480B-A35B-Instruct", "Qwen/Qwen3-Coder-30B-A3B-Instruct", "Qwen/Qwen3.5-397B-A17B",
                       "XiaomiMiMo/MiMo-V2-Flash", "PrimeIntellect/INTELLECT-3"),
               sources=(VLLM + "qwen3coder_tool_parser.py", SGLANG + "qwen3_coder_detector.py",
                        "ollama/ollama model/parsers/intellect3.go",
                        VLLM + "qwen3xml_tool_parser.py", VLLM + "qwen35coder_tool_parser.py",
                        VLLM + "step3p5_tool_parser.py", VLLM + "mimo_tool_parser.py (vllm/parser/mimo.py)",
                        VLLM + "mimov2_flash_tool_parser.py", VLLM + "iquest_coder_tool_parser.py",
                        VLLM + "berrylm_engine_tool_parser.py (vllm/parser/berrylm.py)",
                        VLLM + "qwen3coder_tool_parser_rl.py", VLLM + "minicpmv_engine_tool_parser.py (MiniCPM-V)",
                        VLLM_OLD + "qwen3coder_xml_tool_parser.py",
                        VLLM + "qwen3_engine_tool_parser.py (vllm/parser/qwen3.py: qwen3_coder, qwen3_xml, mimo)",
                        "vllm-project/vllm vllm/parser/nemotron_v3.py, granite_thinking.py (Granite 4.2), kolibri1.py",
                        SGLANG + "mimo_detector.py", SGLANG + "berrylm_detector.py",
                        SGLANG + "qwen3_detector.py", SGLANG + "qwen3_coder_new_detector.py",
                        SGLANG + "step3p5_detector.py (Qwen3-Coder's detector behind a mender of missing tags)",
                        SGLANG + "multi_format_detector.py (tool_format qwen3)", LLAMA_CPP + "StepFun3.7-Flash.jinja",
                        LLAMA_CPP_PARSERS + "qwen3-coder.cpp",
                        "Qwen/Qwen3-Coder-480B-A35B-Instruct chat_template.jinja",
                        *_checked("Qwen3-Coder.jinja d287fb2edf14", "Qwen3.5-4B.jinja a4aee8afcf2e",
                                  "StepFun3.5-Flash.jinja b18b99dff726",
                                  "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja ab7813c3abdd"))),
        XmlParams, XmlSpelling(section_open="<tool_call>", section_close="</tool_call>", section_per_call=True, call_open="<function=",
                    call_close="</function>", strip_newline=True, typing="python", hook=qwen3_coder.HOOK)),
    Row(
        Family("multi_format_python", "SGLang multi_format, tool_format python: <tool_call>\\nf(a=1)\\ng(b=\"x\")\\n"
               "</tool_call> (Python calls with keyword arguments, one a line, in Hermes' tags)",
               sources=(SGLANG + "multi_format_detector.py (_PYTHON_BLOCK, _python_literal)",)),
        SentinelPythonic, Wrapper("<tool_call>", "</tool_call>", lines=True, shared=True)),
    Row(
        Family("glm45", "GLM-4.5/4.6: <tool_call>NAME\\n<arg_key>KEY</arg_key>\\n<arg_value>VALUE</arg_value>\\n"
               "</tool_call> per call (strings raw, other values JSON)",
               models=("zai-org/GLM-4.5", "zai-org/GLM-4.5-Air", "zai-org/GLM-4.6", "zai-org/GLM-4.7",
                       "poolside/Laguna-XS.2", "poolside/Laguna-M.1"),
               sources=(VLLM + "glm4_moe_tool_parser.py", VLLM + "glm47_moe_tool_parser.py",
                        "ollama/ollama model/parsers/laguna.go",
                        SGLANG + "glm4_moe_detector.py", SGLANG + "glm47_moe_detector.py",
                        SGLANG + "spark25_detector.py", SGLANG + "spark3_detector.py",
                        SGLANG + "glm53_flash_detector.py (its tag form)",
                        SGLANG + "ling3_detector.py", SGLANG + "poolside_v1_detector.py",
                        SGLANG + "multi_format_detector.py (tool_format glm)", LLAMA_CPP + "glm_4_5.jinja",
                        VLLM + "ling3_tool_parser.py (vllm/parser/ling3.py)", VLLM + "poolside_v1_tool_parser.py",
                        VLLM + "spark3_tool_parser.py", VLLM + "hyperclovax_seed_think_tool_parser.py",
                        VLLM + "glm_grammar.py (the GLM-4.7 layout its grammar constrains)", LLAMA_CPP_PARSERS + "ling3.cpp",
                        VLLM_OLD + "glm4_tool_only_parser.py (the opening <tool_call> in the prompt: put back)",
                        "lucifer1004/sglang python/sglang/srt/function_call/welm_v4_detector.py (WeLM-v4)",
                        *_checked("GLM-4.6.jinja 8804f445c761", "GLM-4.7-Flash.jinja d63ad536c3c8",
                                  "Spark2.5.jinja afea0f7114d5", "inclusionai-ling-3.0-flash.jinja b4ab3a1c8f74",
                                  "poolside-Laguna-S-2.1.jinja 444819b8ad46",
                                  "poolside-Laguna-XS-2.1.jinja 5f1bf14725b6",
                                  "poolside-Laguna-XS.2.jinja cefcef905157"))),
        XmlParams, XmlSpelling(call_open="<tool_call>", call_close="</tool_call>", name_at="text", key_open="<arg_key>",
                    key_close="</arg_key>", key_at="element", value_open="<arg_value>", value_close="</arg_value>",
                    hook=glm45.HOOK)),
    Row(
        Family("telechat4", "TeleChat4: <tool_call>NAME<param_key>KEY</param_key><param_value>VALUE</param_value>"
               "</tool_call> per call (GLM's layout with param_ tags; strings raw, other values JSON; the JSON layout in "
               "the same tags is Hermes')",
               sources=(SGLANG + "telechat4_detector.py", SGLANG + "xing4_0_detector.py",
                        SGLANG + "xingchen4_detector.py")),
        XmlParams, replace(kv(sep=""), key_open="<param_key>", key_close="</param_key>", value_open="<param_value>",
                           value_close="</param_value>", hook=telechat4.HOOK)),
    Row(
        Family("glm53_flash", 'GLM-5.3-Flash JSON: <tool_call>NAME>{...} per call, no closing tag (the next <tool_call> '
               "or the end closes it; its tag layout is GLM's)", models=("zai-org/GLM-5.3-Flash",),
               sources=(SGLANG + "glm53_flash_detector.py (_parse_json_format)",)),
        NamedJson, NamedSpelling(None, None, "<tool_call>", ">", call_marker=True)),
    Row(
        Family("xing4_0", "Xing4.0 JSON: <tool_call>NAME{...}</tool_call> per call, blanks or a line break free "
               "between the name and the JSON (its tag layout is TeleChat4's, its name-in-JSON layout Hermes')",
               sources=(SGLANG + "xing4_0_detector.py (_split_payload: a tool name, then the JSON arguments)",)),
        NamedJson, NamedSpelling(None, None, "<tool_call>", "", "</tool_call>", call_marker=True)),
    Row(Family('apibank', 'API-Bank (ToolRL): <think>..</think> <tool_call>\\n{"name": ..., "parameters": {...}} per '
               'line\\n</tool_call> <response>..</response>', trained=True),
        JsonCalls, JsonSpelling("<tool_call>", "</tool_call>", "objects", arg_keys=("parameters",), stop="<response>",
                                by_args=True)),
    Row(
        Family("hermes", 'Qwen3/Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call> per call',
               models=("Qwen/Qwen3-8B", "Qwen/Qwen2.5-7B-Instruct", "NousResearch/Hermes-3-Llama-3.1-8B",
                       "ibm-granite/granite-4.0-h-small", "baidu/ERNIE-4.5-21B-A3B-Thinking",
                       "tngtech/DeepSeek-TNG-R1T2-Chimera", "Nanbeige/Nanbeige4.1-3B",
                       "Motif-Technologies/Motif-2-12.7B-Reasoning"),
               sources=(VLLM + "hermes_tool_parser.py", SGLANG + "qwen25_detector.py", SGLANG + "hermes_detector.py",
                        VLLM + "granite4_tool_parser.py", VLLM + "ernie45_tool_parser.py",
                        SGLANG + "tng_r1t2_detector.py",
                        VLLM_OLD + "tng_tool_parser.py, tng_r1t2_tool_parser.py, qwen2_tool_parser.py",
                        SGLANG + "trinity_detector.py (<think> tags around the calls dropped)",
                        SGLANG + "multi_format_detector.py (tool_format default)", LLAMA_CPP + "MiroThinker-v1.jinja",
                        "Nanbeige/Nanbeige4.1-3B chat_template.jinja (SGLang's parser name nanbeige)",
                        *_checked("Qwen-Qwen3-0.6B.jinja 87a2728cb8dc", "Qwen-Qwen2.5-7B-Instruct.jinja cd8e9439f057",
                                  "Qwen-QwQ-32B.jinja 5ed15374ce53", "MiMo-VL.jinja 10490379c20a",
                                  "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja 7ce09d55d369",
                                  "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja 7ce09d55d369",
                                  "ibm-granite-granite-4.0.jinja 9524df67b77a",
                                  "ibm-granite-granite-4.1.jinja fed2756d2d24",
                                  "Bielik-11B-v3.0-Instruct.jinja a30b8c4531dd", "Reka-Edge.jinja 546b04dba749")),
               trained=True),
        JsonCalls, JsonSpelling("<tool_call>", "</tool_call>", "object", trail="\n", respell=False, untagged=True)),
    Row(
        Family("step_audio_2", 'Step-Audio 2: <tool_call>function\\nNAME\\n{...}</tool_call> per call',
               models=("stepfun-ai/Step-Audio-2-mini",),
               sources=(VLLM + "step_audio_2_tool_parser.py",
                        "yhyang201/sglang python/sglang/srt/function_call/step_audio2_detector.py")),
        NamedJson, NamedSpelling(None, None, "<tool_call>function\n", "\n", "</tool_call>", call_marker=True)),
    Row(
        Family("cwm", "CWM: <tool: function>\\nNAME {...}\\n</tool> per call (the name is the body's first word; a body that is "
               "no JSON object is the command argument's text)", models=("facebook/cwm",),
               sources=(VLLM + "cwm_tool_parser.py",)),
        NamedJson, NamedSpelling(None, None, "<tool: function>\n", " ", "\n</tool>", joiner="\n", call_marker=True,
                                 text_key="command")),
    Row(
        Family("multi_format_gptoss", "SGLang multi_format, tool_format gptoss: <tool_call>to=functions.NAME json\\n{...}"
               "\\n</tool_call> per call (harmony's recipient and JSON in Hermes' tags)",
               sources=(SGLANG + "multi_format_detector.py (_GPTOSS_BLOCK)",)),
        NamedJson, NamedSpelling(None, None, "<tool_call>to=functions.", " json\n", "\n</tool_call>", joiner="\n",
                                 call_marker=True)),
    Row(Family('openai', 'OpenAI: {"role": "assistant", "tool_calls": [{"id", "type": "function", "function": {"name", '
               '"arguments": "<JSON>"}}]}'),
        chat_api.OpenAI, None),
    Row(Family('anthropic', 'Anthropic: [{"type": "tool_use", "id": ..., "name": ..., "input": {...}}] (text blocks ignored)'),
        chat_api.Anthropic, None),
    # one JSON object: marked by its "tool_call" key opening the answer, else read as an untagged format
    Row(Family("llama_cpp_generic", 'llama.cpp generic JSON: {"tool_call": {"name": ..., "arguments": {...}}}, '
               '{"tool_calls": [{"name", "arguments", "id"}, ...]} or {"response": "..."} (a text answer), the whole '
               "answer one object",
               sources=("ggml-org/llama.cpp common/chat.cpp (common_chat_params_init_generic, before the autoparser)",)),
        chat_api.LlamaCppGeneric, None),
    Row(Family('nestful', 'NESTFUL: [{"name": ..., "arguments": {...}, "label": "$var_1"}, ...] with "$var_1.result$" '
               'references; the arguments under "parameters" in the list a JSON schema constrains', trained=True,
               sources=(VLLM_OLD + "xlam_tool_parser.py, generic_tool_parser.py (a bare list, no label)",
                        VLLM + "xlam_tool_parser.py (the list bare, after </think> or in a json fence; the lists after "
                        "[TOOL_CALLS] and in <tool_call> are read by mistral_tekken and granite)",
                        VLLM_EXAMPLES + "tool_chat_template_xlam_llama.jinja, tool_chat_template_xlam_qwen.jinja",
                        VLLM + 'utils.py (get_json_schema_from_tools: tool_choice="required" constrains the output to '
                        'a list of {"name", "parameters"}; a named tool choice to the arguments object alone)',
                        SGLANG + "json_array_detector.py, json_array_parser.py, json_detector.py, "
                        'json_schema_composer.py (tool_choice="required": the list of {"name", "parameters"}; a named '
                        "tool choice: the single object, read by llama3_json)")),
        nestful.Nestful, None),
    Row(Family('llama3_json', 'Llama 3.x JSON: [<|python_tag|>]{"name": ..., "parameters": {...}}; {...} (calls joined by ";")',
               sources=(*_checked("meta-llama-Llama-3.1-8B-Instruct.jinja e10ca381b1cc",
                                "meta-llama-Llama-3.2-3B-Instruct.jinja 5816fce10444",
                                "meta-llama-Llama-3.3-70B-Instruct.jinja e10ca381b1cc"),
                        VLLM + "llama_tool_parser.py (llama3_json, llama4_json)", SGLANG + "llama32_detector.py",
                        VLLM_OLD + "llama4_tool_parser.py (llama4_json)")),
        JsonCalls, LLAMA3),
    Row(
        Family("llama4_pythonic", "Llama 4 pythonic: [f(a=1), g(b=\"x\")], optionally inside <|python_start|>..."
               "<|python_end|>", models=("meta-llama/Llama-4-Scout-17B-16E-Instruct",),
               sources=(VLLM + "llama4_pythonic_tool_parser.py", SGLANG + "pythonic_detector.py (a bare list)",
                        VLLM + "pythonic_tool_parser.py (a bare list)",
                        VLLM_EXAMPLES + "tool_chat_template_gemma3_pythonic.jinja, tool_chat_template_toolace.jinja "
                        "(a bare list)")),
        SentinelPythonic, Wrapper("<|python_start|>", "<|python_end|>", close_optional=True, bare=True)),
    Row(
        Family("deepseek_coder_v2", "DeepSeek-Coder-V2: V3's tokens around a python fence, <｜tool▁call▁begin｜>function"
               "<｜tool▁sep｜>NAME\\n```python\\nNAME(\"x\", b=2)\\n```<｜tool▁call▁end｜> (positional arguments placed "
               "on the tool's parameters in declared order)",
               models=("deepseek-ai/DeepSeek-Coder-V2-Instruct-0724", "deepseek-ai/DeepSeek-V2-Lite-Chat"),
               sources=(SGLANG_VNG + "deepseekcoderv2_detector.py (func_detail_regex, _positional_args_to_kwargs)",
                        SGLANG_VNG + "function_call_parser.py (deepseekcoderv2)")),
        NamedJson, DEEPSEEK_CODER_V2),
    Row(
        Family("deepseek_v3", "DeepSeek-V3/R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n"
               "{...}\\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>",
               models=("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1-0528"),
               sources=(VLLM + "deepseekv3_tool_parser.py", SGLANG + "deepseekv3_detector.py",
                        *_checked("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja dd2675619a64",
                                  "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja bbe594884b44",
                                  "llama-cpp-deepseek-r1.jinja 0d11fd8d7cf3"))),
        NamedJson, DEEPSEEK_V3),
    Row(
        Family("deepseek_v31", "DeepSeek-V3.1/V3.2-Exp: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}"
               "<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>",
               models=("deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3.2-Exp"),
               sources=(VLLM + "deepseekv31_tool_parser.py", SGLANG + "deepseekv31_detector.py",
                        *_checked("deepseek-ai-DeepSeek-V3.1.jinja d9f5f351b276"))),
        NamedJson, DEEPSEEK_V31),
    Row(Family('kimi_k2', 'Kimi-K2: '
               '<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>',
               sources=(*_checked("Kimi-K2-Instruct.jinja 1d396d5b128c", "Kimi-K2-Thinking.jinja 2f6c593d5068",
                                  "moonshotai-Kimi-K2.jinja 9fcc72b7c248"),
                        LLAMA_CPP + "moonshotai-Kimi-K2-Thinking.jinja (the call's id as given, functions.NAME:IDX)",
                        VLLM + "kimi_k2_tool_parser.py", VLLM + "kimi_k2_engine_tool_parser.py",
                        SGLANG + "kimik2_detector.py", LLAMA_CPP_PARSERS + "kimi-k2.cpp")),
        NamedJson, KIMI_K2),
    Row(
        Family("llm_jp_harmony", "LLM-jp-4.1 harmony: gpt-oss harmony with a space after the special tokens a word "
               "follows (<|start|> assistant to=functions.NAME<|channel|> commentary <|constrain|> json<|message|> {...})"
               " and <|end|> closing every call but the last (<|call|>)",
               sources=("llm-jp/sglang python/sglang/srt/function_call/llm_jp_harmony_detector.py",
                        "llm-jp/llm-jp-vllm llm_jp_vllm/llmjp4/tool_parser.py",
                        LLAMA_CPP_PARSERS + "llm-jp-harmony.cpp"),
               reasoning=(("<|channel|> analysis<|message|>", "<|end|>"), ("<|channel|>analysis<|message|>", "<|end|>"))),
        harmony.Harmony, harmony.HarmonySpelling(recipient_first=True, content_type="<|constrain|> json", start_first=True,
                                                 between="<|end|>", spaced=True)),
    Row(Family('harmony', 'gpt-oss harmony: <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}'
               '<|call|> per call (also read: the guide\'s <|channel|>commentary to=functions.NAME <|constrain|>json; '
               'analysis channel before it is reasoning)',
               sources=(*_checked("openai-gpt-oss-120b.jinja a4c9919cbbd4"), VLLM + "gptoss_tool_parser.py",
                        VLLM + "openai_tool_parser.py", SGLANG + "gpt_oss_detector.py",
                        SGLANG + "harmony_tool_parser.py (commentary messages to functions.NAME)",
                        LLAMA_CPP_PARSERS + "gpt-oss.cpp"),
               reasoning=(('<|channel|>analysis<|message|>', '<|end|>'), ('<think>', '</think>'))),
        harmony.Harmony, harmony.TEMPLATE),
    Row(
        Family("deepseek_v32", "DeepSeek V3.2 DSML: <｜DSML｜function_calls><｜DSML｜invoke name=\"NAME\"><｜DSML｜parameter "
               "name=\"KEY\" string=\"true|false\">VALUE</｜DSML｜parameter>...</｜DSML｜invoke></｜DSML｜function_calls>",
               models=("deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2-Exp"),
               sources=(VLLM + "deepseekv32_tool_parser.py", SGLANG + "deepseekv32_detector.py",
                        VLLM + "deepseekv32_engine_tool_parser.py", LLAMA_CPP_PARSERS + "deepseek.cpp (function_calls)",
                        *_checked("deepseek-ai-DeepSeek-V3.2.jinja 8e5a13fcc4bd"), LLAMA_CPP + "DeepSeek-V3.2.jinja",
                        "deepseek-ai/DeepSeek-V3.2 encoding/encoding_dsv32.py")),
        XmlParams, dsml("<｜DSML｜", "function_calls")),
    Row(
        Family("deepseek_v4", "DeepSeek V4 DSML: V3.2's invoke/parameter elements inside <｜DSML｜tool_calls>",
               models=("deepseek-ai/DeepSeek-V4-Flash",),
               sources=(VLLM + "deepseekv4_tool_parser.py", SGLANG + "deepseekv4_detector.py",
                        VLLM + "deepseekv4_engine_tool_parser.py", LLAMA_CPP_PARSERS + "deepseek.cpp (tool_calls)",
                        *_checked("deepseek-ai-DeepSeek-V4.jinja 7bd4fbdf0c06",
                                  "deepseek-ai-DeepSeek-V4-Flash-0731.jinja aec3d906bce8"))),
        XmlParams, dsml("<｜DSML｜", "tool_calls")),
    Row(
        Family("deepseek_v41", "DeepSeek V4.1 DSML: a space after the bar (<｜DSML｜ invoke ...>), inside <｜DSML｜ calls>",
               models=("deepseek-ai/DeepSeek-V4.1-Flash",),
               sources=(VLLM + "deepseekv41_engine_tool_parser.py", SGLANG + "deepseekv41_detector.py")),
        XmlParams, dsml("<｜DSML｜ ", "calls")),
    Row(
        Family("gigachat35", "GigaChat 3.5 (DeepSeek V3.2's DSML with the bar ｜GCML｜): <｜GCML｜tool_calls><｜GCML｜invoke "
               "name=\"NAME\"><｜GCML｜parameter name=\"KEY\" string=\"true|false\">VALUE</｜GCML｜parameter>...</｜GCML｜invoke>"
               "</｜GCML｜tool_calls>", sources=(VLLM + "gigachat35_tool_parser.py", SGLANG + "gigachat35_detector.py",
                                          LLAMA_CPP + "GigaChat3.5.jinja")),
        XmlParams, dsml("<｜GCML｜", "tool_calls")),
    Row(
        Family("minimax_m2", "MiniMax-M2: <minimax:tool_call><invoke name=\"NAME\"><parameter name=\"KEY\">VALUE"
               "</parameter></invoke></minimax:tool_call> (strings raw, other values JSON)",
               models=("MiniMaxAI/MiniMax-M2", "MiniMaxAI/MiniMax-M2.1", "MiniMaxAI/MiniMax-M2.5"),
               sources=(VLLM + "minimax_m2_tool_parser.py", VLLM + "minimax_m2_sanitized_tool_parser.py",
                        SGLANG + "minimax_m2.py",
                        LLAMA_CPP + "unsloth-MiniMax-M2.jinja",
                        *_checked("MiniMax-M2.jinja 967ff7e38767"))),
        XmlParams, invoke("minimax:tool_call")),
    Row(
        Family("seed_oss", "Seed-OSS: <seed:tool_call><function=NAME><parameter=KEY>VALUE</parameter></function>"
               "</seed:tool_call> per call, reasoning in <seed:think>",
               models=("ByteDance-Seed/Seed-OSS-36B-Instruct",), reasoning=(("<seed:think>", "</seed:think>"),),
               sources=(VLLM + "seed_oss_tool_parser.py", SGLANG + "seed_oss_detector.py",
                        VLLM + "seed_oss_engine_tool_parser.py",
                        *_checked("ByteDance-Seed-OSS.jinja 3f9e0dc4adeb"))),
        XmlParams, XmlSpelling(section_open="<seed:tool_call>", section_close="</seed:tool_call>", section_per_call=True,
            call_open="<function=", call_close="</function>", typing="python")),
    Row(
        Family("step3", "Step-3: <｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"NAME\">"
               "<steptml:parameter name=\"KEY\">VALUE</steptml:parameter></steptml:invoke><｜tool_call_end｜>"
               "<｜tool_calls_end｜>", models=("stepfun-ai/step3",),
               sources=(VLLM + "step3_tool_parser.py", SGLANG + "step3_detector.py",
                        SGLANG + "step3v_detector.py (line breaks between the tags)")),
        XmlParams, XmlSpelling(section_open="<｜tool_calls_begin｜>", section_close="<｜tool_calls_end｜>",
            call_open="<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke ",
            call_close="</steptml:invoke><｜tool_call_end｜>", name_at="attr",
            key_open="<steptml:parameter ", value_close="</steptml:parameter>", key_at="attr")),
    Row(
        Family("step_deepresearch", "Step DeepResearch (steptml): <steptml:toolcall><steptml:invoke name=\"NAME\">"
               "<steptml:parameter name=\"KEY\">VALUE</steptml:parameter></steptml:invoke></steptml:toolcall> (strings "
               "raw, other values JSON)",
               sources=("vllm-project/vllm vllm/entrypoints/openai/tool_parsers/step_deepresearch_tool_parser.py",)),
        XmlParams, invoke("steptml:toolcall", "steptml:")),
    Row(
        Family("dots1", "dots.llm: <dots_function_call><invoke name=\"NAME\"><parameter name=\"KEY\">VALUE</parameter>"
               "</invoke></dots_function_call>", models=("rednote-hilab/dots.llm1.inst",),
               sources=("vllm-project/vllm vllm/frontend/processing/tool_parsers/dots_tool_parser.py",
                        SGLANG + "dots_detector.py")),
        XmlParams, invoke("dots_function_call")),
    Row(
        Family("muse_glimmer", "Muse Glimmer (ATEM): <atem:function_calls><atem:invoke name=\"NAME\"><atem:parameter "
               "name=\"KEY\">VALUE</atem:parameter></atem:invoke></atem:function_calls>",
               sources=(VLLM + "muse_glimmer_tool_parser.py", SGLANG + "muse_glimmer_detector.py",
                        LLAMA_CPP_PARSERS + "muse-glimmer.cpp", *_checked("muse-glimmer.jinja cfc67e5f349f"))),
        XmlParams, invoke("atem:function_calls", "atem:")),
    Row(
        Family("minicpm5", "MiniCPM5: <function name=\"NAME\"><param name=\"KEY\">VALUE</param></function> per call "
               "(strings raw, or in <![CDATA[...]]> when they hold <, & or a line break; other values as Python "
               "writes them: True, ['a', 2]; settled by the declared types)",
               models=("openbmb/MiniCPM4-8B",),
               sources=(SGLANG + "minicpm5_detector.py", SGLANG + "minicpm4_xml_detector.py (MiniCPM-4's XML calls)",
                        ("vllm-project/vllm vllm/frontend/processing/tool_parsers/minicpm5xml_tool_parser.py (JSON, "
                        "then a Python literal)"), LLAMA_CPP_PARSERS + "minicpm5.cpp",
                        *_checked("openbmb-MiniCPM5-1B.jinja 7451a05cf1e2"))),
        XmlParams, XmlSpelling(call_open="<function ", call_close="</function>", name_at="attr", key_open="<param ",
            value_close="</param>", key_at="attr", typing="python", cdata=True)),
    Row(
        Family("longcat", "LongCat (GLM's layout): <longcat_tool_call>NAME\\n<longcat_arg_key>KEY</longcat_arg_key>\\n"
               "<longcat_arg_value>VALUE</longcat_arg_value>\\n</longcat_tool_call>",
               sources=(VLLM + "longcat_tool_parser.py",)),
        XmlParams, kv("longcat_")),
    Row(
        Family("zaya_xml", "ZAYA: Qwen3-Coder's XML in <zyphra_tool_call>: <zyphra_tool_call>\\n<function=NAME>\\n"
               "<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n</zyphra_tool_call> per call (strings raw, other "
               "values JSON)", sources=(VLLM + "zaya_xml_tool_parser.py",)),
        XmlParams, XmlSpelling(section_open="<zyphra_tool_call>", section_close="</zyphra_tool_call>",
            section_per_call=True, call_open="<function=", call_close="</function>", strip_newline=True, typing="python")),
    Row(
        Family("iquest_q1", "IQuest Q1 (GLM-4.7's layout): <iquest_tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE"
               "</arg_value></iquest_tool_call> per call (strings raw, other values JSON)",
               sources=(SGLANG + "iquest_q1_detector.py",)),
        XmlParams, replace(kv(sep=""), call_open="<iquest_tool_call>", call_close="</iquest_tool_call>")),
    Row(
        Family("iquest_coder_v2", "IQuest-Coder V2 (GLM's layout): <iquestcoder_tool_call>NAME\\n<arg_key>KEY</arg_key>\\n"
               "<arg_value>VALUE</arg_value>\\n</iquestcoder_tool_call> per call (strings raw, other values JSON)",
               sources=(VLLM + "iquest_coder_v2_tool_parser.py",)),
        XmlParams, replace(kv(), call_open="<iquestcoder_tool_call>", call_close="</iquestcoder_tool_call>")),
    Row(
        Family("k2_horizon_json", 'K2-Horizon JSON: <ifm|tool_calls><ifm|tool_call>{"name": ..., "arguments": {...}}'
               "</ifm|tool_call>...</ifm|tool_calls>", models=("k2-horizon/K2-Horizon",),
               sources=(VLLM + "k2_horizon_tool_parser.py (_parse_json_call)",
                        SGLANG + "k2_v3_detector.py (_parse_json_block)"),
               reasoning=K2_THINK),
        JsonCalls, JsonSpelling("<ifm|tool_call>", "</ifm|tool_call>", "object", arg_keys=("arguments", "parameters"),
                                follows=("{",), lead="", section=("<ifm|tool_calls>", "</ifm|tool_calls>"))),
    Row(
        Family("k2_horizon", "K2-Horizon: <ifm|tool_calls><ifm|tool_call>NAME<ifm|arg_key>KEY</ifm|arg_key><ifm|arg_value>"
               "VALUE</ifm|arg_value></ifm|tool_call></ifm|tool_calls> (the default 'xml' tool_call_format; strings raw, "
               "other values JSON; the 'xml_typed' layout's <ifm|arg_type> elements are read by recovery)",
               models=("k2-horizon/K2-Horizon",), sources=(VLLM + "k2_horizon_tool_parser.py",
                                                          SGLANG + "k2_v3_detector.py (parser k2_horizon)",
                                                          LLAMA_CPP_PARSERS + "k2-horizon.cpp")),
        XmlParams, replace(kv("ifm|", section="ifm|tool_calls", sep=""),
        type_open="<ifm|arg_type>", type_close="</ifm|arg_type>")),
    Row(
        Family("solar_open2", "Solar Open 2: <|tool_call:start|>NAME\\n<|tool_arg:start|>KEY<|tool_arg:value|>VALUE"
               "<|tool_arg:end|>\\n...<|tool_call:end|> per call (strings raw, other values JSON)",
               sources=(VLLM + "solar_open2_tool_parser.py",
                        "vessl-ai/sglang python/sglang/srt/function_call/solar_open2_detector.py")),
        # the key's closing token is the value's opening one: it is spelt as two tags, "<|tool_arg:" then "value|>"
        XmlParams, XmlSpelling(call_open="<|tool_call:start|>", call_close="<|tool_call:end|>", name_at="text",
            key_open="<|tool_arg:start|>", key_close="<|tool_arg:", key_at="element", value_open="value|>",
            value_close="<|tool_arg:end|>", sep="")),
    Row(
        Family("mistral_tekken", 'Mistral (Tekken tokenizers before v11): [TOOL_CALLS][{"name": ..., "arguments": {...}}, '
               "...] (no space after the token)", models=("mistralai/Mistral-Nemo-Instruct-2407",),
               sources=(VLLM + "mistral_tool_parser.py",
                        *_checked("mistralai-Mistral-Nemo-Instruct-2407.jinja e4676cb56dff")),
               reasoning=mistral.REASONING),
        JsonCalls, MISTRAL_TEKKEN),
    Row(Family('mistral', 'Mistral (tokenizers v2-v7): [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]', reasoning=mistral.REASONING,
               models=("mistralai/Mistral-Small-3.1-24B-Instruct-2503",),
               sources=(SGLANG + "mistral_detector.py",
                        LLAMA_CPP + "mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja (each call's \"id\" read and "
                        "dropped)")),
        JsonCalls, MISTRAL),
    Row(Family('mistral_v11', 'Mistral (tokenizers v11+): [TOOL_CALLS]NAME[ARGS]{...} per call ([CALL_ID]id before [ARGS] in some)', reasoning=mistral.REASONING,
               sources=(*_checked("Mistral-Small-3.2-24B-Instruct-2506.jinja 5b8f31f11198",
                                  "mistralai-Ministral-3-14B-Reasoning-2512.jinja 39f03c383413",
                                  "unsloth-mistral-Devstral-Small-2507.jinja 039a4710e2aa"),
                        LLAMA_CPP_PARSERS + "ministral3.cpp")),
        mistral.MistralV11, None),
    Row(
        Family("granite", 'Granite 3.x: <|tool_call|>[{"name": ..., "arguments": {...}}, ...]',
               models=("ibm-granite/granite-3.0-8b-instruct", "ibm-granite/granite-3.1-8b-instruct"),
               sources=(VLLM + "granite_tool_parser.py",
                        VLLM + "granite_engine_tool_parser.py (vllm/parser/granite.py)",
                        LLAMA_CPP + "ibm-granite-granite-3.3-2B-Instruct.jinja (its template writes no calls)")),
        JsonCalls, JsonSpelling("<|tool_call|>", None, "list", alt_opens=("<tool_call>",))),
    # after Granite, whose row keeps a broken <|tool_call|> text; this one's own texts Granite's strict reader rejects
    Row(
        Family("phi4_mini_tags", 'Phi-4-mini in llama.cpp\'s template: <|tool_call|>{"name": ..., "arguments": {...}}'
               "<|/tool_call|> per call (Granite's opening token, one object, a closing token)",
               sources=(LLAMA_CPP + "llama-cpp-microsoft-Phi-4-mini-instruct.jinja",)),
        JsonCalls, JsonSpelling("<|tool_call|>", "<|/tool_call|>", "object", lead="", between="", follows=("{",))),
    Row(
        Family("phi4_mini", 'Phi-4-mini: functools[{"name": ..., "arguments": {...}}, ...]',
               models=("microsoft/Phi-4-mini-instruct", "fireworks-ai/llama-3-firefunction-v2"),
               sources=(VLLM + "phi4mini_tool_parser.py", SGLANG + "phi4mini_detector.py",
                        *_checked("fireworks-ai-llama-3-firefunction-v2.jinja fcb749f5c5d6"))),
        JsonCalls, JsonSpelling("functools", None, "list", arg_keys=("arguments", "parameters"), tight=True)),
    Row(
        Family("multi_format_minimax", "SGLang multi_format, tool_format minimax: <tool_calls><invoke name=\"NAME\">"
               "<parameter name=\"KEY\">VALUE</parameter></invoke></tool_calls> (MiniMax-M2's elements in <tool_calls>; "
               "strings raw, other values JSON)",
               sources=(SGLANG + "multi_format_detector.py (_MINIMAX_BLOCK, _MINIMAX_INVOKE, _MINIMAX_PARAM)",)),
        XmlParams, replace(invoke("tool_calls"), refused_attr="string")),
    Row(
        Family("multi_format_dsv32", "SGLang multi_format, tool_format dsv32: <tool_calls><invoke name=\"NAME\">"
               "<parameter name=\"KEY\" string=\"true|false\">VALUE</parameter></invoke></tool_calls> (DeepSeek V3.2's "
               "typed parameters in the minimax layout's tags; string=\"false\" values JSON)",
               sources=(SGLANG + "multi_format_detector.py (_MINIMAX_PARAM's string flag, type_aware)",)),
        XmlParams, dsml("<", "tool_calls")),
    Row(
        Family("minimax", 'MiniMax: <tool_calls>\\n{"name": ..., "arguments": {...}} per line\\n</tool_calls>',
               models=("MiniMaxAI/MiniMax-Text-01", "MiniMaxAI/MiniMax-M1-80k"),
               sources=(VLLM + "minimax_tool_parser.py", *_checked("MiniMax-M1.jinja e1790d8fbe1c"))),
        JsonCalls, JsonSpelling("<tool_calls>", "</tool_calls>", "lines", follows=("{", '"name"'))),
    Row(
        Family("jamba", 'Jamba / Hunyuan: <tool_calls>[{"name": ..., "arguments": {...}}, ...]</tool_calls>',
               models=("ai21labs/AI21-Jamba-1.5-Mini", "tencent/Hunyuan-A13B-Instruct",
                       "ServiceNow-AI/Apriel-1.5-15b-Thinker", "ServiceNow-AI/Apriel-1.6-15b-Thinker"),
               sources=(VLLM + "jamba_tool_parser.py", VLLM + "hunyuan_a13b_tool_parser.py",
                        VLLM_EXAMPLES + "tool_chat_template_hunyuan_a13b.jinja",
                        *_checked("Apriel-1.6-15b-Thinker-fixed.jinja 2f5ce4b3c1e0",
                                  "unsloth-Apriel-1.5.jinja fae87682d355"))),
        JsonCalls, JsonSpelling("<tool_calls>", "</tool_calls>", "list")),
    Row(
        Family("nemotron", 'Nemotron: <TOOLCALL>[{"name": ..., "arguments": {...}}, ...]</TOOLCALL>',
               models=("nvidia/Llama-3.3-Nemotron-Super-49B-v1", "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
                       "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5"),
               sources=(VLLM + "nemotron_json_tool_parser.py", VLLM + "nemotron_nano_v2_tool_parser.py",
                        VLLM_EXAMPLES + "tool_chat_template_nemotron_json.jinja",
                        LLAMA_CPP + "nvidia-Llama-3_3-Nemotron-Super-49B-v1_5.jinja",
                        *_checked("NVIDIA-Nemotron-Nano-v2.jinja 52ae8e50fa08"))),
        JsonCalls, JsonSpelling("<TOOLCALL>", "</TOOLCALL>", "list")),
    Row(
        Family("internlm", 'InternLM 2: <|action_start|><|plugin|>\\n{"name": ..., "parameters": {...}}<|action_end|> per call',
               models=("internlm/internlm2_5-7b-chat", "internlm/Intern-S1"),
               sources=(VLLM + "internlm2_tool_parser.py", VLLM + "intern_s1_tool_parser.py",
                        SGLANG + "internlm_detector.py")),
        JsonCalls, JsonSpelling("<|action_start|><|plugin|>", "<|action_end|>", "object", arg_keys=("parameters", "arguments"))),
    Row(
        Family("qwen25_coder_tools", 'Qwen2.5-Coder: <tools>\\n{"name": ..., "arguments": {...}}\\n</tools> per call',
               models=("Qwen/Qwen2.5-Coder-7B-Instruct", "Qwen/Qwen2.5-Coder-32B-Instruct"),
               sources=(VLLM + "qwen25_coder_tool_parser.py", VLLM + "qwen2_5_coder_tool_parser.py")),
        JsonCalls, JsonSpelling("<tools>", "</tools>", "object", arg_keys=("arguments", "parameters"), trail="\n")),
    Row(
        Family("pangu", 'Pangu: [unused11][{"name": ..., "arguments": {...}}, ...][unused12]',
               sources=(VLLM + "pangu_tool_parser.py",)),
        JsonCalls, JsonSpelling("[unused11]", "[unused12]", "list", arg_keys=("arguments", "parameters"))),
    Row(
        Family("granite_20b_fc", 'Granite 20B FunctionCalling: <function_call> {"name": ..., "arguments": {...}} per call, '
               "no closing tag", models=("ibm-granite/granite-20b-functioncalling",),
               sources=(VLLM + "granite_20b_fc_tool_parser.py", VLLM_OLD + "granite_20bfc_tool_parser.py")),
        JsonCalls, JsonSpelling("<function_call>", None, "object", lead=" ", between=" ")),
    Row(
        Family("hyperclovax_14b", 'HyperCLOVA X SEED Think 14B: <|im_start|>assistant -> tool/function_call\\n'
               '[{"name": ..., "arguments": {...}}, ...]<|im_end|>',
               models=("naver-hyperclovax/HyperCLOVAX-SEED-Think-14B",),
               sources=(VLLM + "hyperclovax_seed_think_14b_tool_parser.py",)),
        JsonCalls, JsonSpelling(" -> tool/function_call\n", "<|im_end|>", "list", arg_keys=("arguments", "parameters"))),
    Row(
        Family("minicpm3", "MiniCPM3: python call lines in a code fence between <|tool_call_start|> and <|tool_call_end|>",
               models=("openbmb/MiniCPM3-4B",),
               sources=(VLLM_OLD + "minicpm_tool_parser.py",
                        VLLM_EXAMPLES + "tool_chat_template_minicpm3.jinja"),
               reasoning=(("<|thought_start|>", "<|thought_end|>"),)),
        SentinelPythonic, Wrapper("<|tool_call_start|>\n```python\n", "\n```\n<|tool_call_end|>", lines=True)),
    Row(
        Family("lfm2", "LFM2: <|tool_call_start|>[f(a=1), g(b=\"x\")]<|tool_call_end|>", models=("LiquidAI/LFM2-1.2B",),
               sources=(VLLM + "lfm2_tool_parser.py", VLLM + "openpangu_v2_tool_parser.py (a JSON list in the tags)",
                        SGLANG + "lfm2_detector.py",
                        LLAMA_CPP + "llama-cpp-lfm2.jinja (a JSON list in the tags; a call's \"id\" is not read strictly)",
                        LLAMA_CPP_PARSERS + "lfm2.cpp (Python calls in the tags, JSON's true, false and null too)",
                        LLAMA_CPP + "LFM2-8B-A1B.jinja, LFM2.5-Instruct.jinja (their templates write no calls)",
                        *_checked("LFM2.5-8B-A1B.jinja 6d65c8804847"))),
        SentinelPythonic, Wrapper("<|tool_call_start|>", "<|tool_call_end|>", json_ok=True)),
    Row(
        Family("olmo3", "OLMo 3: <function_calls>f(a=1)\\ng(b=\"x\")</function_calls> (one pythonic call per line)",
               sources=(VLLM + "olmo3_tool_parser.py",)),
        SentinelPythonic, Wrapper("<function_calls>", "</function_calls>", lines=True)),
    # no literal marks its lines: read when a request or a template names it (detected, they are ToolACE's claim)
    Row(
        Family("granite_pythonic", "Granite pythonic (vLLM): f(a=1)\\ng(b=\"x\") (one call a line, no tag; the other "
               "lines are text)", models=("ibm-granite/granite-3.3-8b-instruct", "ibm-granite/granite-4.0-h-small"),
               sources=(VLLM + "granite_pythonic_tool_parser.py (_CALL_RE per line)",)),
        CallLines, Wrapper("", "", lines=True)),
    Row(
        Family("openfunctions_v2", "Gorilla OpenFunctions v2: <<function>>f(a=1)<<function>>g(b=\"x\") (each call after "
               "its own <<function>>, no close; an answer without it is text)",
               models=("gorilla-llm/gorilla-openfunctions-v2",),
               sources=("ShishirPatil/gorilla openfunctions/openfunctions_utils.py (strip_function_calls)",
                        "ShishirPatil/gorilla openfunctions/inference_local.py (get_prompt, format_response)")),
        SentinelPythonic, Wrapper("<<function>>", "", lines=True, between="<<function>>", close_optional=True)),
    # (a call as an argument's value, a composition no call list holds, is read as no value: the argument dropped)
    Row(
        Family("nexusraven", "NexusRaven-V2: Call: f(a=1); g(b=\"x\")<bot_end> then an optional Thought: (text; "
               "<bot_end> is the stop sequence, often left out)",
               models=("Nexusflow/NexusRaven-V2-13B",),
               sources=("nexusflowai/NexusRaven-V2 README.md, How-To-Prompt.ipynb (the prompt and its answers)",
                        "nexusflowai/nexusraven-pip nexusraven/client.py (_parse_tool_calls: calls split at ';')")),
        SentinelPythonic, Wrapper("Call: ", "<bot_end>", lines=True, between="; ", close_optional=True, shared=True)),
    Row(
        Family("function_gemma4", 'Gemma 4 JSON calls (mlx-lm): <|tool_call>{"name": NAME, "arguments": {"key": '
               '<|"|>text<|"|>, "n": 5}}<tool_call|> per call (strings between <|"|> tokens or in JSON quotes)',
               sources=("ml-explore/mlx-lm mlx_lm/tool_parsers/function_gemma4.py (chosen by tool_parser_type)",),
               reasoning=(("<|channel>thought\n", "<channel|>"), ("<|channel>thought", "<channel|>"),
                          ("<|channel>", "<channel|>"))),
        QuotedJsonCalls, JsonSpelling("<|tool_call>", "<tool_call|>", "object", lead="", between="", follows=("{",),
                                quote='<|"|>')),
    Row(
        Family(
            "gemma4",
            'Gemma 4: <|tool_call>call:NAME{key:<|"|>text<|"|>,n:5}<tool_call|> per call',
            models=("google/gemma-4-31B-it", "google/gemma-4-26B-A4B-it", "google/gemma-4-12B-it"),
            sources=(
                "google/gemma-4-31B-it chat_template.jinja (format_argument; sha256 ae53464b...c4d8de4c6d4)",
                "llama.cpp models/templates/gemma4.jinja",
                *_checked("google-gemma-4-31B-it.jinja 85a08664d16d",
                          "google-gemma-4-31B-it-interleaved.jinja 65f93a25708c"),
                "vLLM vllm/tool_parsers/gemma4_tool_parser.py",
                VLLM + "gemma4_engine_tool_parser.py", SGLANG + "gemma4_detector.py", LLAMA_CPP_PARSERS + "gemma4.cpp",
            ),
            # the thought channel's name is markup, not reasoning (vLLM's Gemma 4 reasoning parser drops it too)
            reasoning=(("<|channel>thought\n", "<channel|>"), ("<|channel>thought", "<channel|>"), ("<|channel>", "<channel|>")),
        ),
        BraceKV, BraceSpelling("<|tool_call>", "<tool_call|>", '<|"|>')),
    Row(
        Family(
            "functiongemma",
            "FunctionGemma: <start_function_call>call:NAME{key:<escape>text<escape>}<end_function_call> per call",
            models=("google/functiongemma-270m-it",),
            sources=("vLLM vllm/tool_parsers/functiongemma_tool_parser.py",),
            reasoning=(),
        ),
        BraceKV, BraceSpelling("<start_function_call>", "<end_function_call>", "<escape>")),
    Row(
        Family("apertus", 'Apertus: <|tools_prefix|>[{"NAME": {...}}, ...]<|tools_suffix|>',
               models=("swiss-ai/Apertus-8B-Instruct-2509", "swiss-ai/Apertus-70B-Instruct-2509"),
               sources=(VLLM + "apertus_tool_parser.py", SGLANG + "apertus2509_detector.py",
                        *_checked("Apertus-8B-Instruct.jinja dea688e9f24a"))),
        JsonCalls, JsonSpelling("<|tools_prefix|>", "<|tools_suffix|>", "list", keyed=True)),
    Row(
        Family("command_a", 'Command A: <|START_ACTION|>[{"tool_call_id": "0", "tool_name": ..., "parameters": {...}}, ...]'
               "<|END_ACTION|>",
               models=("CohereLabs/c4ai-command-a-03-2025", "CohereLabs/c4ai-command-r7b-12-2024",
                       "CohereLabs/command-a-plus-05-2026-bf16"),
               sources=(VLLM + "cohere_command_tool_parser.py", SGLANG + "cohere_command4_detector.py",
                        VLLM_OLD + "command_tool_parser.py", LLAMA_CPP_PARSERS + "cohere2moe.cpp",
                        *_checked("Cohere2MoE.jinja d8366efb9f07",
                                  "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja cc60b5532793")),
               reasoning=(("<|START_THINKING|>", "<|END_THINKING|>"),)),
        JsonCalls, JsonSpelling("<|START_ACTION|>", "<|END_ACTION|>", "list", arg_keys=("parameters", "arguments"),
             name_key="tool_name", id_key="tool_call_id")),
    Row(
        Family("command_r_plus", 'Command R / R+: Action: then a JSON code fence holding [{"tool_name": ..., '
               '"parameters": {...}}, ...]',
               models=("CohereForAI/c4ai-command-r-plus", "CohereForAI/c4ai-command-r-v01"),
               sources=(*_checked("CohereForAI-c4ai-command-r-plus-tool_use.jinja bf9e9ee8c0f2"),
                        "ollama/ollama server/testdata/tools/command-r-plus.gotmpl (Action: and the fence on one line)")),
        JsonCalls, JsonSpelling("Action:\n```json\n", "```", "list", arg_keys=("parameters",), name_key="tool_name",
                                alt_opens=("Action: ```json\n",))),
    Row(
        Family("rwkv", 'RWKV: **Tool Call:** then a JSON code fence holding {"name": ..., "arguments": {...}}, per call',
               sources=(VLLM + "rwkv_tool_parser.py",)),
        JsonCalls, JsonSpelling("**Tool Call:**\n```json\n", "```", "object", lead="", trail="\n", between="\n\n")),
    Row(
        Family("gigachat31", 'GigaChat 3.1: <|function_call|>{"name": ..., "arguments": {...}} at the end of the assistant '
               "message (gigachat3's JSON after another token)",
               sources=(*_checked("GigaChat3.1-10B-A1.8B.jinja 304f0d64aa3b"), VLLM + "gigachat3_tool_parser.py")),
        JsonCalls, JsonSpelling("<|function_call|>", None, "object", lead="",
             between="<|message_sep|>\n\nassistant<|role_sep|>\n")),
    Row(
        Family("gigachat3", 'GigaChat 3: function call<|role_sep|>\\n{"name": ..., "arguments": {...}}',
               models=("ai-sage/GigaChat3-10B-A1.8B", "ai-sage/GigaChat3-702B-A36B-preview"),
               sources=(*_checked("GigaChat3-10B-A1.8B.jinja bbbf2de800b6"), VLLM + "gigachat3_tool_parser.py",
                        SGLANG + "gigachat3_detector.py", LLAMA_CPP_PARSERS + "gigachat-v3.cpp")),
        JsonCalls, JsonSpelling("function call<|role_sep|>", None, "object", alt_opens=("<|function_call|>",),
             between="<|message_sep|>\n\n")),
    Row(
        Family("inkling", 'Inkling: <|content_invoke_tool_json|>{"name": ..., "args": {...}}<|end_message|> per call',
               sources=("vLLM vllm/parser/inkling.py", VLLM + "inkling_tool_parser.py", SGLANG + "inkling_detector.py",
                        LLAMA_CPP_PARSERS + "inkling.cpp (the tool's name echoed before each call's token)"),
               reasoning=(("<|content_thinking|>", "<|end_message|>"),)),
        JsonCalls, JsonSpelling("<|content_invoke_tool_json|>", "<|end_message|>", "object", arg_keys=("args", "arguments"),
             lead="", between="<|message_model|>")),
    Row(
        Family("longcat_json", 'LongCat-Flash-Chat: <longcat_tool_call>\\n{"name": ..., "arguments": {...}}\\n'
               "</longcat_tool_call> per call (Hermes' layout in LongCat's tags; newer checkpoints write GLM's layout "
               "in the same tags: the XML row longcat)",
               models=("meituan-longcat/LongCat-Flash-Chat",),
               sources=(VLLM + "longcat_tool_parser.py",
                        "sgl-project/sglang python/sglang/srt/function_call/longcat_detector.py")),
        JsonCalls, JsonSpelling("<longcat_tool_call>", "</longcat_tool_call>", "object", follows=("{",))),
    Row(
        Family("rubra", 'Rubra: starttoolcall{"name": ..., "arguments": {...}}endtoolcall per call (plain words, no '
               "special tokens)",
               models=("rubra-ai/Meta-Llama-3-8B-Instruct", "rubra-ai/Mistral-7B-Instruct-v0.3",
                       "rubra-ai/Phi-3-mini-128k-instruct", "rubra-ai/Qwen2-7B-Instruct", "rubra-ai/gemma-1.1-2b-it"),
               sources=("sanjay920/vllm vllm/entrypoints/openai/tool_parsers/rubra_tool_parser.py (its parser rubra)",
                        "rubra-ai/rubra docs/docs/inference/vllm.md (rubra-ai's vLLM fork)")),
        JsonCalls, JsonSpelling("starttoolcall", "endtoolcall", "object", lead="", follows=("{",))),
    Row(
        Family("tgi", 'TGI tool grammar: {"function": {"_name": NAME, KEY: VALUE, ...}} (one call, its arguments beside '
               '"_name"; the name no_tool is a text answer)',
               sources=("huggingface/text-generation-inference router/src/infer/tool_grammar.rs (the grammar)",
                        "huggingface/text-generation-inference router/src/chat.rs (parse_output)")),
        JsonCalls, JsonSpelling('{"function":', None, "object", name_key="_name", flat=True, text_names=("no_tool",),
                                marker='"_name":', lead=" ", trail="}", between=", ")),
    Row(
        Family("plamo3", "PLaMo 3: <|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|>"
                         "<|plamo:begin_tool_name:plamo|>NAME<|plamo:end_tool_name:plamo|>"
                         "<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{...}"
                         "<|plamo:end_tool_arguments:plamo|>...",
               models=("pfnet/plamo-3-nict-31b-instruct",),
               sources=("vLLM vllm/tool_parsers/plamo3_tool_parser.py (BEGIN_TOOL_ARGS_TAG with the JSON constraint)",
                        "vLLM vllm/reasoning/plamo3_reasoning_parser.py", VLLM + "plamo3_engine_tool_parser.py",
                        SGLANG + "plamo3_detector.py"),
               reasoning=((_plamo("begin_think"), _plamo("end_think")),)),
        NamedJson, NamedSpelling(_plamo("begin_tool_requests"), _plamo("end_tool_requests"),
              _plamo("begin_tool_request") + _plamo("begin_tool_name"),
              _plamo("end_tool_name") + _plamo("begin_tool_arguments"),
              _plamo("end_tool_arguments") + _plamo("end_tool_request"),
              args_prefix="<|plamo:constrain|>json<|plamo:msg|>")),
    Row(
        Family("solar_open", "Solar Open: <|tool_calls|><|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{...}"
                             "<|tool_call:end|>...<|calls|> (the call id read and dropped; written as the call's place)",
               models=("upstage/Solar-Open-100B",),
               sources=("UpstageAI/vllm vllm/tool_parsers/solar_open_tool_parser.py",
                        *_checked("upstage-Solar-Open-100B.jinja 4618a1ec1a34")),
               reasoning=(("<|think|>", "<|end|>"),)),
        NamedJson, NamedSpelling("<|tool_calls|>", "<|calls|>", "<|tool_call:begin|>", "<|tool_call:args|>",
                                 "<|tool_call:end|>", id_close="<|tool_call:name|>")),
    Row(
        Family("functionary_v32", "Functionary v3.2: >>>NAME\\n{...} per call (>>>all\\n starts text)",
               models=("meetkai/functionary-small-v3.2", "meetkai/functionary-medium-v3.2"),
               sources=(LLAMA_CPP_PARSERS + "functionary-v3-2.cpp",
                        *_checked("meetkai-functionary-medium-v3.2.jinja 5c7c96c27cfe"))),
        NamedJson, NamedSpelling(None, None, ">>>", "\n", joiner="\n", text_recipients=("all",))),
    Row(
        Family("onyx", "Onyx: to=NAME<|message|>{...}<|eom|> (a recipient per message; to=user<|message|> and "
               "to=self<|message|> start text, not a call)", reasoning=(),
               sources=("analytics-zoo/sglang python/sglang/srt/function_call/onyx_detector.py",)),
        NamedJson,
        NamedSpelling(None, None, "to=", "<|message|>", "<|eom|>", joiner="\n", text_recipients=("user", "self"),
                      header="<|start|>assistant ")),
    Row(
        Family("functionary_v2", "Functionary v2: <|from|>assistant\\n<|recipient|>NAME\\n<|content|>{...} per call, "
               "<|stop|> after the last (the recipient all starts text)",
               models=("meetkai/functionary-small-v2.5", "meetkai/functionary-medium-v2.4"),
               sources=("MeetKai/functionary functionary/prompt_template/prompt_template_v2.py, jinja_templates/v2.txt",)),
        NamedJson, NamedSpelling(None, None, "<|from|>assistant\n<|recipient|>", "\n<|content|>", joiner="\n",
                                 text_recipients=("all",), call_marker=True)),
    Row(
        Family("react", "ReAct: Thought: ...\\nAction: NAME\\nAction Input: {...} (the Observation: and Final Answer: lines "
               "are text)",
               models=("ToolBench/ToolLLaMA-2-7b-v2",),
               sources=("OpenBMB/ToolBench toolbench/inference/Prompts/ReAct_prompts.py",
                        "langchain-ai/langchain libs/langchain/langchain/agents/output_parsers/react_single_input.py",
                        "run-llama/llama_index llama-index-core/llama_index/core/agent/react/output_parser.py")),
        NamedJson, NamedSpelling(None, None, "Action: ", "\nAction Input: ", joiner="\n")),
    Row(
        Family("qwen_agent", "Qwen-Agent's function-call prompt: ✿FUNCTION✿: NAME\\n✿ARGS✿: {...} per "
               "call (✿RESULT✿: and ✿RETURN✿: lines are text)",
               sources=("QwenLM/Qwen-Agent qwen_agent/llm/fncall_prompts/qwen_fncall_prompt.py",)),
        NamedJson, NamedSpelling(None, None, "✿FUNCTION✿: ", "\n✿ARGS✿: ", joiner="\n", call_marker=True)),
)

FORMATS = register_catalog(CATALOG)


def rows_of(grammar: type) -> list[Row]:
    """The catalog's rows that ``grammar`` reads, in the table's order."""
    return [row for row in CATALOG if row.grammar is grammar]
