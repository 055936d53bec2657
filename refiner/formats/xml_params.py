"""The rows of the XML parameter grammar (:mod:`refiner.formats.xml_grammar`): one :class:`XmlSpelling` per model
family, registered as formats by :func:`~refiner.formats.family.register_rows`. A family that writes this grammar is
one more row here.
"""

from __future__ import annotations

from dataclasses import replace

from refiner.formats.family import Family, register_rows
from refiner.formats.xml_grammar import XmlParams
from refiner.formats.xml_spelling import (  # noqa: F401  (the grammar's names, imported from here by other modules)
    DETECT_CHARS,
    HOOKS,
    NAME_LINE_CHARS,
    SPACED_NAME_PATTERN,
    Hook,
    XmlSpelling,
)

QWEN3_CODER = XmlSpelling(
    section_open="<tool_call>", section_close="</tool_call>", section_per_call=True,
    call_open="<function=", call_close="</function>", strip_newline=True, typing="python", hook="qwen3_coder",
)
GLM45 = XmlSpelling(
    call_open="<tool_call>", call_close="</tool_call>", name_at="text",
    key_open="<arg_key>", key_close="</arg_key>", key_at="element", value_open="<arg_value>",
    value_close="</arg_value>", hook="glm45",
)


def _dsml(bar: str, section: str) -> XmlSpelling:
    """DeepSeek's DSML: ``bar`` is ``<｜DSML｜`` (V3.2, V4) or ``<｜DSML｜ `` (V4.1), ``section`` the block's word."""
    close = "</" + bar[1:]
    return XmlSpelling(
        section_open=f"{bar}{section}>", section_close=f"{close}{section}>",
        call_open=f"{bar}invoke ", call_close=f"{close}invoke>", name_at="attr",
        key_open=f"{bar}parameter ", value_close=f"{close}parameter>", key_at="attr", typing="attr", type_attr="string",
    )


def _invoke(section: str, prefix: str = "", param: str = "parameter") -> XmlSpelling:
    """``<SECTION><PREFIXinvoke name="f"><PREFIXparameter name="k">v</PREFIXparameter></PREFIXinvoke></SECTION>``
    (MiniMax-M2, dots.llm, Muse Glimmer): strings raw, other values JSON."""
    return XmlSpelling(
        section_open=f"<{section}>", section_close=f"</{section}>",
        call_open=f"<{prefix}invoke ", call_close=f"</{prefix}invoke>", name_at="attr",
        key_open=f"<{prefix}{param} ", value_close=f"</{prefix}{param}>", key_at="attr",
    )


def _kv(prefix: str = "", *, section: str = "", name_sep: str = "\n", sep: str = "\n", suffix: str = "") -> XmlSpelling:
    """The key/value tag pairs (GLM's layout): ``<PREFIXtool_call>NAME[NAME_SEP]<PREFIXarg_key>k</PREFIXarg_key>
    <PREFIXarg_value>v</PREFIXarg_value></PREFIXtool_call>``, in a ``section`` when given."""
    return XmlSpelling(
        section_open=f"<{section}>" if section else "", section_close=f"</{section}>" if section else "",
        call_open=f"<{prefix}tool_call>", call_close=f"</{prefix}tool_call>", name_at="text", name_sep=name_sep,
        key_open=f"<{prefix}arg_key>", key_close=f"</{prefix}arg_key>", key_at="element",
        value_open=f"<{prefix}arg_value>", value_close=f"</{prefix}arg_value>", sep=sep, tag_suffix=suffix,
    )


VLLM = "vllm-project/vllm vllm/tool_parsers/"
SGLANG = "sgl-project/sglang python/sglang/srt/function_call/"
LLAMA_CPP = "ggml-org/llama.cpp models/templates/"

# Hunyuan's <tool_calls> section is shared with the JSON formats minimax (262) and jamba (263), its <tool_call> and
# <arg_key> with qwen3_coder and glm45: its rows rank before all of them (their sniff needs the <tool_call> inside).
ROWS_HUNYUAN = (
    (Family("hunyuan_v4", "Hunyuan HY v4: <tool_calls:S><tool_call:S>NAME<arg_key:S>KEY</arg_key:S><arg_value:S>VALUE"
            "</arg_value:S></tool_call:S></tool_calls:S>, S a per-checkpoint suffix (any is read)",
            sources=(VLLM + "hy_v4_tool_parser.py",)),
     _kv(section="tool_calls", name_sep="\n", sep="", suffix=":6124c78e")),
    (Family("hunyuan_v3", "Hunyuan HY v3: <tool_calls><tool_call>NAME<tool_sep><arg_key>KEY</arg_key><arg_value>VALUE"
            "</arg_value></tool_call></tool_calls> (strings raw, other values JSON)",
            sources=(VLLM + "hy_v3_tool_parser.py",)),
     _kv(section="tool_calls", name_sep="<tool_sep>", sep="")),
)

# Qwen3-Coder and GLM share <tool_call> with apibank (60) and hermes (70): they rank before them, Qwen3-Coder first.
ROWS_TOOL_CALL = (
    (Family("qwen3_coder", "Qwen3-Coder XML: <tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n"
            "</function>\\n</tool_call> per call (strings raw, other values JSON)",
            models=("Qwen/Qwen3-Coder-480B-A35B-Instruct", "Qwen/Qwen3-Coder-30B-A3B-Instruct", "Qwen/Qwen3.5-397B-A17B"),
            sources=(VLLM + "qwen3coder_tool_parser.py", SGLANG + "qwen3_coder_detector.py",
                     "Qwen/Qwen3-Coder-480B-A35B-Instruct chat_template.jinja")),
     QWEN3_CODER),
    (Family("glm45", "GLM-4.5/4.6: <tool_call>NAME\\n<arg_key>KEY</arg_key>\\n<arg_value>VALUE</arg_value>\\n"
            "</tool_call> per call (strings raw, other values JSON)",
            models=("zai-org/GLM-4.5", "zai-org/GLM-4.5-Air", "zai-org/GLM-4.6", "zai-org/GLM-4.7"),
            sources=(VLLM + "glm4_moe_tool_parser.py", VLLM + "glm47_moe_tool_parser.py",
                     SGLANG + "glm4_moe_detector.py", LLAMA_CPP + "glm_4_5.jinja", LLAMA_CPP + "GLM-4.6.jinja")),
     GLM45),
)

# Markers of their own: ranked after the sentinel formats (DeepSeek V3/V3.1 at 200/201).
ROWS_OWN_MARKERS = (
    (Family("deepseek_v32", "DeepSeek V3.2 DSML: <｜DSML｜function_calls><｜DSML｜invoke name=\"NAME\"><｜DSML｜parameter "
            "name=\"KEY\" string=\"true|false\">VALUE</｜DSML｜parameter>...</｜DSML｜invoke></｜DSML｜function_calls>",
            models=("deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2-Exp"),
            sources=(VLLM + "deepseekv32_tool_parser.py", LLAMA_CPP + "DeepSeek-V3.2.jinja",
                     "deepseek-ai/DeepSeek-V3.2 encoding/encoding_dsv32.py")),
     _dsml("<｜DSML｜", "function_calls")),
    (Family("deepseek_v4", "DeepSeek V4 DSML: V3.2's invoke/parameter elements inside <｜DSML｜tool_calls>",
            models=("deepseek-ai/DeepSeek-V4-Flash",), sources=(VLLM + "deepseekv4_tool_parser.py",)),
     _dsml("<｜DSML｜", "tool_calls")),
    (Family("deepseek_v41", "DeepSeek V4.1 DSML: a space after the bar (<｜DSML｜ invoke ...>), inside <｜DSML｜ calls>",
            models=("deepseek-ai/DeepSeek-V4.1-Flash",), sources=(VLLM + "deepseekv41_engine_tool_parser.py",)),
     _dsml("<｜DSML｜ ", "calls")),
    (Family("minimax_m2", "MiniMax-M2: <minimax:tool_call><invoke name=\"NAME\"><parameter name=\"KEY\">VALUE"
            "</parameter></invoke></minimax:tool_call> (strings raw, other values JSON)",
            models=("MiniMaxAI/MiniMax-M2", "MiniMaxAI/MiniMax-M2.1", "MiniMaxAI/MiniMax-M2.5"),
            sources=(VLLM + "minimax_m2_tool_parser.py", LLAMA_CPP + "unsloth-MiniMax-M2.jinja")),
     _invoke("minimax:tool_call")),
    (Family("seed_oss", "Seed-OSS: <seed:tool_call><function=NAME><parameter=KEY>VALUE</parameter></function>"
            "</seed:tool_call> per call, reasoning in <seed:think>",
            models=("ByteDance-Seed/Seed-OSS-36B-Instruct",), reasoning=(("<seed:think>", "</seed:think>"),),
            sources=(VLLM + "seed_oss_tool_parser.py", LLAMA_CPP + "ByteDance-Seed-OSS.jinja")),
     XmlSpelling(section_open="<seed:tool_call>", section_close="</seed:tool_call>", section_per_call=True,
                 call_open="<function=", call_close="</function>", typing="python")),
    (Family("step3", "Step-3: <｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"NAME\">"
            "<steptml:parameter name=\"KEY\">VALUE</steptml:parameter></steptml:invoke><｜tool_call_end｜>"
            "<｜tool_calls_end｜>", models=("stepfun-ai/step3",),
            sources=(VLLM + "step3_tool_parser.py", SGLANG + "step3_detector.py")),
     XmlSpelling(section_open="<｜tool_calls_begin｜>", section_close="<｜tool_calls_end｜>",
                 call_open="<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke ",
                 call_close="</steptml:invoke><｜tool_call_end｜>", name_at="attr",
                 key_open="<steptml:parameter ", value_close="</steptml:parameter>", key_at="attr")),
    (Family("dots1", "dots.llm: <dots_function_call><invoke name=\"NAME\"><parameter name=\"KEY\">VALUE</parameter>"
            "</invoke></dots_function_call>", models=("rednote-hilab/dots.llm1.inst",),
            sources=("vllm-project/vllm vllm/frontend/processing/tool_parsers/dots_tool_parser.py",)),
     _invoke("dots_function_call")),
    (Family("muse_glimmer", "Muse Glimmer (ATEM): <atem:function_calls><atem:invoke name=\"NAME\"><atem:parameter "
            "name=\"KEY\">VALUE</atem:parameter></atem:invoke></atem:function_calls>",
            sources=(VLLM + "muse_glimmer_tool_parser.py",)),
     _invoke("atem:function_calls", "atem:")),
    (Family("minicpm5", "MiniCPM5: <function name=\"NAME\"><param name=\"KEY\">VALUE</param></function> per call",
            sources=("vllm-project/vllm vllm/frontend/processing/tool_parsers/minicpm5xml_tool_parser.py",)),
     XmlSpelling(call_open="<function ", call_close="</function>", name_at="attr", key_open="<param ",
                 value_close="</param>", key_at="attr")),
    (Family("longcat", "LongCat (GLM's layout): <longcat_tool_call>NAME\\n<longcat_arg_key>KEY</longcat_arg_key>\\n"
            "<longcat_arg_value>VALUE</longcat_arg_value>\\n</longcat_tool_call>",
            sources=(VLLM + "longcat_tool_parser.py",)),
     _kv("longcat_")),
    (Family("k2_horizon", "K2-Horizon: <ifm|tool_calls><ifm|tool_call>NAME<ifm|arg_key>KEY</ifm|arg_key><ifm|arg_value>"
            "VALUE</ifm|arg_value></ifm|tool_call></ifm|tool_calls> (the default 'xml' tool_call_format; strings raw, "
            "other values JSON; the 'xml_typed' layout's <ifm|arg_type> elements are read by recovery)",
            models=("k2-horizon/K2-Horizon",), sources=(VLLM + "k2_horizon_tool_parser.py",)),
     replace(_kv("ifm|", section="ifm|tool_calls", sep=""),
             type_open="<ifm|arg_type>", type_close="</ifm|arg_type>")),
)

ROWS = ROWS_TOOL_CALL + ROWS_HUNYUAN + ROWS_OWN_MARKERS
register_rows(XmlParams, 51, ROWS_TOOL_CALL)  # first: later rows leave them the <tool_call> family's markers
register_rows(XmlParams, 47, ROWS_HUNYUAN)
register_rows(XmlParams, 230, ROWS_OWN_MARKERS)
