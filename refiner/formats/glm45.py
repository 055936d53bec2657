"""The hook of the ``glm45`` row of the XML parameter grammar (GLM-4.5 to GLM-5:
``<tool_call>NAME\\n<arg_key>KEY</arg_key>\\n<arg_value>VALUE</arg_value>\\n...</tool_call>``): :data:`HOOK`."""

from __future__ import annotations

from refiner.formats.base import ROW_CHARS, WireFormat
from refiner.formats.text import skip_ws
from refiner.formats.xml_lenient import CALL, OUT, WORD, TagStates
from refiner.formats.xml_spelling import Hook, name_line
from refiner.formats.xmlvalues import untagged_calls

OPEN, CLOSE = "<tool_call>", "</tool_call>"
KEY, KEY_END = "<arg_key>", "</arg_key>"
VAL, VAL_END = "<arg_value>", "</arg_value>"


def _sniff(fmt: WireFormat, body: str, at: int) -> bool:
    """A ``<tool_call>`` block that opens with a one-word tool name alone, or with anything but JSON and holds one of
    the key and value tags; a bare ``<arg_key>``."""
    if not body.startswith(OPEN, at):
        return True
    k = skip_ws(body, at + len(OPEN))
    if body.startswith(KEY, k):
        return True
    if k >= len(body) or body[k] in "{[\"'<":
        return False
    block, closed, _ = body[k : k + ROW_CHARS].partition(CLOSE)
    if any(tag in block for tag in (KEY, KEY_END, VAL, VAL_END)):
        return True
    name, _, rest = block.partition("\n")  # (a name line never closed: prose mentioning the tag, not a call)
    return bool(closed) and not rest.strip() and WORD.fullmatch(name.strip()) is not None


def _region_start(fmt: WireFormat, body: str, at: int) -> int:
    """A region found by an ``<arg_key>`` starts at the call's name line: the key's own line, or the one above it."""
    return at if body.startswith(OPEN, at) else name_line(body, at)


# Tags written wrong (lenient reading only)

STATES = TagStates(("", ""), (OPEN, CLOSE), (KEY, KEY_END), (VAL, VAL_END), {
    OUT: (OPEN, CLOSE, KEY), CALL: (KEY, CLOSE, OPEN, KEY_END)}, stray_close=True)

HOOK = Hook(respell=STATES.respell, sniff=_sniff, region_start=_region_start,  # untagged: NAME, KEY, VALUE lines
            read_untagged=lambda fmt, text, start, offered: untagged_calls(fmt, text, start, offered, "", True))
