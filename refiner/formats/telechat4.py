"""TeleChat4 (SGLang's ``telechat4``, ``xing4_0`` and ``xingchen4`` detectors): the hook of the ``telechat4`` row of
the XML parameter grammar (:mod:`refiner.formats.xml_grammar`), which reads and writes
``<tool_call>NAME<param_key>KEY</param_key><param_value>VALUE</param_value></tool_call>``. The hook tells its blocks
from GLM's (a name alone) and Hermes' (JSON), which share ``<tool_call>``.
"""

from __future__ import annotations

from refiner.formats.base import ROW_CHARS, WireFormat
from refiner.formats.xml_spelling import Hook

OPEN, KEY = "<tool_call>", "<param_key>"


def _sniff(fmt: WireFormat, body: str, at: int) -> bool:
    """A ``<tool_call>`` that a tool name and then a ``<param_key>`` follow, or a bare ``<param_key>``."""
    if not body.startswith(OPEN, at):
        return True
    start = at + len(OPEN)
    k = body.find(KEY, start, at + ROW_CHARS)
    return k >= 0 and fmt.is_name(body[start:k].strip())


HOOK = Hook(sniff=_sniff)
