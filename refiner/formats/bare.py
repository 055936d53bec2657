"""Calls written ``NAME{...}`` once every token around them was lost (lenient reading only, shared by Mistral v11,
DeepSeek and Kimi-K2): a plausible identifier at the start of the text, of a line or right after the call before it,
then a JSON object directly after it. Prose is never read as a call. One linear regex pass; JSON decoded only where
the shape allows.
"""

from __future__ import annotations

import re

from refiner.calls import ToolCall
from refiner.formats.base import Lenient
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, take_items
from refiner.formats.lenient import add_arguments_call
from refiner.formats.strict import JSON_DECODER
from refiner.formats.text import skip_ws

# A plausible tool name: an identifier, dots and dashes allowed inside (``get_weather``, ``math.gcd``).
IDENTIFIER = r"[A-Za-z_][\w.\-]*"
BARE_NAME = re.compile(rf"({IDENTIFIER})(?=\{{)")
# Line starts tried for the first call when the text does not start with one.
MAX_LINE_STARTS = 8
_BRACE = re.compile(r"\}\s*")


def bare_calls(text: str, start: int, out: Lenient, head: re.Pattern[str] = BARE_NAME) -> bool:
    """Reads the calls written ``NAME{...}`` one after another (whitespace between), the first at ``start`` (after
    whitespace) or at the start of one of the next lines; ``head`` matches a call's name (group 1) and ends where
    its JSON object starts. Arguments that do not decode are repaired up to where the next call starts (or the end
    of the text, where the text may stop inside them). Whether a call was read."""
    pos = skip_ws(text, start)
    m = head.match(text, pos)
    tries = 0
    while m is None and tries < MAX_LINE_STARTS:
        nl = text.find("\n", pos)
        if nl < 0:
            return False
        pos = skip_ws(text, nl + 1)
        m = head.match(text, pos)
        tries += 1
    if m is None:
        return False
    read = 0
    while m is not None and read < MAX_RECOVERED_ITEMS and take_items(1):
        name, at = m.group(1), m.end()
        try:
            args, end = JSON_DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):
            args = end = None
        if type(args) is dict:
            out.calls.append(ToolCall(name, {str(k): v for k, v in args.items()}))
            read += 1
            pos = skip_ws(text, end)
            m = head.match(text, pos)
            continue
        # the next call after a broken one: a name right after a "}" (whitespace between)
        nxt = next(filter(None, (head.match(text, b.end()) for b in _BRACE.finditer(text, at))), None)
        stop = nxt.start() if nxt is not None else len(text)
        add_arguments_call(out, name, text[at:stop], at_end=nxt is None)
        read += 1
        m = nxt
    return read > 0
