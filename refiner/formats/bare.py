"""Calls written ``NAME{...}`` once every token around them was lost (lenient reading: Mistral v11, DeepSeek,
Kimi-K2): an identifier at the text's or a line's start or right after the call before it, then a JSON object."""

from __future__ import annotations

import re

from refiner.calls import ToolCall
from refiner.formats.base import Lenient, markup_name
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, take_items
from refiner.formats.lenient import add_arguments_call
from refiner.formats.strict import json_head
from refiner.formats.text import skip_ws

# A plausible tool name: an identifier, dots and dashes allowed inside (``get_weather``, ``math.gcd``).
IDENTIFIER = r"[A-Za-z_][\w.\-]*"
BARE_NAME = re.compile(rf"({IDENTIFIER})(?=\{{)")
MAX_LINE_STARTS = 8  # line starts tried for the first call when the text does not start with one
_BRACE = re.compile(r"\}\s*")


def bare_calls(text: str, start: int, out: Lenient, head: re.Pattern[str] = BARE_NAME) -> bool:
    """Reads calls ``NAME{...}`` in a row from ``start`` or one of the next line starts (``head`` matches up to the
    object, the name its group 1), arguments that do not decode repaired up to the next call; whether one was read."""
    pos = skip_ws(text, start)
    m = head.match(text, pos)
    for _ in range(MAX_LINE_STARTS):
        if m is not None or (nl := text.find("\n", pos)) < 0:
            break
        pos = skip_ws(text, nl + 1)
        m = head.match(text, pos)
    if m is None:
        return False
    read = 0
    while m is not None and read < MAX_RECOVERED_ITEMS and take_items(1):
        name, at = m.group(1), m.end()
        if markup_name(name):  # another format's marker: no call from here on
            break
        read += 1
        args, end = json_head(text, at) or (None, None)
        if type(args) is dict:
            out.calls.append(ToolCall(name, {str(k): v for k, v in args.items()}))
            m = head.match(text, skip_ws(text, end))
            continue
        # the next call after a broken one: a name right after a "}" (whitespace between)
        nxt = next(filter(None, (head.match(text, b.end()) for b in _BRACE.finditer(text, at))), None)
        stop = nxt.start() if nxt is not None else len(text)
        add_arguments_call(out, name, text[at:stop], at_end=nxt is None)
        m = nxt
    return read > 0
