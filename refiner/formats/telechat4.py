"""TeleChat4 (SGLang's ``telechat4``, ``xing4_0`` and ``xingchen4`` detectors read the same markup): the hook of the
``telechat4`` row of the XML parameter grammar (:mod:`refiner.formats.xml_grammar`, which reads and writes
``<tool_call>NAME<param_key>KEY</param_key><param_value>VALUE</param_value></tool_call>``).

Its call tag is Hermes' and GLM's ``<tool_call>``: a block is this row's when the tool name is followed by a
``<param_key>`` (a block holding a name alone is GLM's, whose row ranks first; prose that mentions the tag is no
one's), and a bare ``<param_key>`` (its block's tag lost) is this row's. The JSON calls the same detectors read in
``<tool_call>`` are Hermes' row's.
"""

from __future__ import annotations

from refiner.formats.base import ROW_CHARS, WireFormat
from refiner.formats.xml_spelling import Hook

OPEN, KEY = "<tool_call>", "<param_key>"


def _sniff(fmt: WireFormat, body: str, at: int) -> bool:
    """A ``<tool_call>`` that a tool name and then a ``<param_key>`` follow, or a bare ``<param_key>``."""
    if not body.startswith(OPEN, at):
        return True
    seg = body[at + len(OPEN) : at + ROW_CHARS]
    k = seg.find(KEY)
    return k >= 0 and fmt.is_name(seg[:k].strip())


HOOK = Hook(sniff=_sniff)
