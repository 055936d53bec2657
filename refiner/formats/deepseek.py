"""DeepSeek V3/R1 and V3.1 tool calls: two spellings of the named-JSON grammar (:mod:`refiner.formats.named_json`),
rows ``deepseek_v3`` and ``deepseek_v31`` of the catalog. The tokens are written with full-width bars and ``▁``
(U+2581) for spaces. V3 writes ``function<｜tool▁sep｜>NAME`` and its arguments in a ``json`` code fence, calls apart
by a line break; V3.1 writes ``NAME<｜tool▁sep｜>{...}``, calls back to back. Each row reads the other's layout when
it recovers a broken text (``also``), names may hold spaces, and whitespace between the tokens is free (``loose``).
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
