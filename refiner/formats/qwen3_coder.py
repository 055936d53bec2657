"""The hook of the ``qwen3_coder`` row of the XML parameter grammar (:data:`HOOK`; Qwen3-Coder, Qwen3.5:
``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>``)."""

from __future__ import annotations

from refiner.formats.base import ROW_CHARS, WireFormat
from refiner.formats.text import skip_ws
from refiner.formats.xml_lenient import CALL, LABEL, OUT, TagStates
from refiner.formats.xml_spelling import NAME_LINE_CHARS, Hook, name_line
from refiner.formats.xmlvalues import untagged_calls

OPEN, CLOSE = "<tool_call>", "</tool_call>"
FUNC, FUNC_END = "<function=", "</function>"
PARAM, PARAM_END = "<parameter=", "</parameter>"


def _sniff(fmt: WireFormat, body: str, at: int) -> bool:
    """A ``<tool_call>`` whose block opens with ``<function=`` (or a look-alike, or ``NAME>`` and a parameter); a bare
    ``<function=NAME>`` followed by a parameter or ``</function>`` (not by Llama's JSON); a bare ``<parameter=``."""
    if body.startswith(OPEN, at):
        k = skip_ws(body, at + len(OPEN))
        if body.startswith(FUNC, k):
            return True
        if body.startswith("{", k):
            return False  # a JSON object (Hermes' block): neither a tag nor a name
        # <function= written wrong (the tag token at k), or lost: NAME> and a parameter or the end
        hit = next(STATES.speller.scan(body, k, k + 1), None) if body.startswith(("<", "["), k) else None
        if hit is not None and STATES.role(hit) == FUNC:
            return True
        m = LABEL.match(body, hit.end if hit is not None and hit.word is None else k)
        return m is not None and body.startswith((PARAM, FUNC_END), skip_ws(body, m.end()))
    if body.startswith(FUNC, at):
        close = body.find(">", at, at + ROW_CHARS)
        if close < 0:
            return True  # cut inside the name: nothing else writes "<function=" without JSON after it
        k = skip_ws(body, close + 1)
        return k >= len(body) or body.startswith((PARAM, FUNC_END), k)
    return True


def _region_start(fmt: WireFormat, body: str, at: int) -> int:
    """A region found by ``<parameter=`` or ``<function=`` starts at its block's ``<tool_call>``, else a line above."""
    if body.startswith(OPEN, at):
        return at
    o = body.rfind(OPEN, max(0, at - NAME_LINE_CHARS), at)
    if o >= 0 and body.find(CLOSE, o, at) < 0:
        return o
    return name_line(body, at) if body.startswith(PARAM, at) else at


# Tags written wrong (lenient reading only)

STATES = TagStates((OPEN, CLOSE), (FUNC, FUNC_END), (PARAM, ""), ("", PARAM_END),
                   {OUT: (OPEN, FUNC), CALL: (PARAM, FUNC_END)})

HOOK = Hook(respell=STATES.respell, sniff=_sniff, region_start=_region_start,  # untagged: NAME>, KEY>, value lines
            read_untagged=lambda fmt, text, start, offered: untagged_calls(fmt, text, start, offered, ">", False))
