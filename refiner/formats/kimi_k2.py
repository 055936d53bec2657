"""Kimi-K2 tool calls, the catalog's row ``kimi_k2``: a spelling of the named-JSON grammar
(:mod:`refiner.formats.named_json`). The call id is ``functions.NAME:INDEX``; recovery also reads the singular
``<|tool_call_section_begin|>``.
"""

from __future__ import annotations

from refiner.formats.base import NAME_PATTERN
from refiner.formats.named_json import NamedSpelling

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL_BEGIN, ARG_BEGIN, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"

K2 = NamedSpelling(SECTION_BEGIN, SECTION_END, CALL_BEGIN + "functions.", ARG_BEGIN, CALL_END, counter=":", loose=True,
                   names=NAME_PATTERN, respelt=(("<|tool_call_section_begin|>", SECTION_BEGIN),
                                                ("<|tool_call_section_end|>", SECTION_END)))
