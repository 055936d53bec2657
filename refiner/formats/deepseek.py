"""DeepSeek V3/R1 and V3.1 tool calls, rows ``deepseek_v3`` and ``deepseek_v31``: spellings of the named-JSON grammar
(:mod:`refiner.formats.named_json`). V3 writes ``function<｜tool▁sep｜>NAME`` and its arguments in a ``json`` code
fence, calls a line apart; V3.1 ``NAME<｜tool▁sep｜>{...}``, back to back. Each recovers the other's layout too.
"""

from __future__ import annotations

from dataclasses import replace

from refiner.formats.base import SPACED_NAME_PATTERN
from refiner.formats.named_json import NamedSpelling

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"

_V3 = NamedSpelling(CALLS_BEGIN, CALLS_END, CALL_BEGIN + "function" + SEP, "\n```json\n", "\n```" + CALL_END,
                    joiner="\n", loose=True, names=SPACED_NAME_PATTERN)
_V31 = NamedSpelling(CALLS_BEGIN, CALLS_END, CALL_BEGIN, SEP, CALL_END, loose=True, names=SPACED_NAME_PATTERN)
V3, V31 = replace(_V3, also=(_V31,)), replace(_V31, also=(_V3,))
