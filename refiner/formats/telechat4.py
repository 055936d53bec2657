"""TeleChat4 (SGLang's ``telechat4``, ``xing4_0`` and ``xingchen4`` detectors): the hook of the ``telechat4`` row of the
XML parameter grammar (:mod:`refiner.formats.xml_grammar`), which reads and writes
``<tool_call>NAME<param_key>KEY</param_key><param_value>VALUE</param_value></tool_call>``. The hook tells its blocks
from GLM's (a name alone, or ``<arg_key>``) and Hermes' (JSON), which share ``<tool_call>``."""

from __future__ import annotations

from refiner.formats.base import ROW_CHARS, WireFormat
from refiner.formats.xml_spelling import Hook

OPEN, CLOSE, KEY = "<tool_call>", "</tool_call>", "<param_key>"


def _sniff(fmt: WireFormat, body: str, at: int) -> bool:
    """A ``<tool_call>`` whose first ``<param_key>`` follows a tool name, with only calls of a tool name alone
    (``<tool_call>NAME</tool_call>``) and text between calls before that call; a bare ``<param_key>``."""
    if not body.startswith(OPEN, at):
        return True
    k = body.find(KEY, at, at + ROW_CHARS)
    if k < 0:
        return False
    start = at + len(OPEN)
    close = body.find(CLOSE, start, k)
    while close >= 0:  # a call without arguments before the first key, then any text up to the next call
        nxt = body.find(OPEN, close, k)
        if nxt < 0 or not fmt.is_name(body[start:close].strip()):
            return False
        start = nxt + len(OPEN)
        close = body.find(CLOSE, start, k)
    return fmt.is_name(body[start:k].strip())


HOOK = Hook(sniff=_sniff)
