"""The hook of the ``glm45`` row of the XML parameter grammar (GLM-4.5 to GLM-5:
``<tool_call>NAME\\n<arg_key>KEY</arg_key>\\n<arg_value>VALUE</arg_value>\\n...</tool_call>``): :data:`HOOK`."""

from __future__ import annotations

import re
from collections.abc import Callable

from refiner.formats.base import NAME_PATTERN, ROW_CHARS, WireFormat
from refiner.formats.tags import Hit, Speller, respell_by_state
from refiner.formats.text import skip_ws
from refiner.formats.xml_spelling import Hook, name_line
from refiner.formats.xmlvalues import untagged_calls

OPEN, CLOSE = "<tool_call>", "</tool_call>"
KEY, KEY_END = "<arg_key>", "</arg_key>"
VAL, VAL_END = "<arg_value>", "</arg_value>"
TAGS = (OPEN, KEY, KEY_END, VAL, VAL_END, CLOSE)
_WORD = re.compile(NAME_PATTERN)  # a tool name that stands on its line alone: one word, not prose


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
    return bool(closed) and not rest.strip() and _WORD.fullmatch(name.strip()) is not None


def _region_start(fmt: WireFormat, body: str, at: int) -> int:
    """A region found by an ``<arg_key>`` starts at the call's name line: the key's own line, or the one above it."""
    return at if body.startswith(OPEN, at) else name_line(body, at)


# Tags written wrong (lenient reading only)

SPELLER = Speller(TAGS)
_ROLE = {(t.strip("</>"), t.startswith("</")): t for t in TAGS}  # (word, closing) -> tag
# Where the reader stands: outside a call, in a call between its parts, in a key, after a key, in a value.
_OUT, _CALL, _KEY, _AFTER_KEY, _VALUE = range(5)
_EXPECTED = {_OUT: (OPEN, CLOSE, KEY), _CALL: (KEY, CLOSE, OPEN, KEY_END), _KEY: (KEY_END,), _AFTER_KEY: (VAL,),
             _VALUE: (VAL_END,)}
_NEXT = {OPEN: _CALL, CLOSE: _OUT, KEY: _KEY, KEY_END: _AFTER_KEY, VAL: _VALUE, VAL_END: _CALL}


def _role(hit: Hit | None) -> str | None:
    """The tag a token spells as written (``None``: another format's tag, or no token)."""
    return None if hit is None or hit.word is None else _ROLE[hit.word, hit.closing]


def _step(text: str, state: int, h: Hit, nxt: Hit | None, prev_end: int, prev_role: str | None,
          put: Callable[[int, int, str, str], None]) -> str | None:
    """The tag the token ``h`` is read as where the grammar stands (``None``: text), for the hook's respelling
    (:func:`~refiner.formats.tags.respell_by_state`): a look-alike of a tag is that tag (of its closing tag where that
    belongs); another format's tag is the tag expected there when what follows fits it, else text; a lost
    ``<tool_call>`` (``<arg_key>``) is put back before the one-word name line (key line) above the first key
    (``</arg_key>``); a stray ``</arg_value>`` after a bare name is dropped."""
    before = text[prev_end : h.start]
    after_blank = not text[h.end : nxt.start if nxt else len(text)].strip()
    own, next_own = _role(h), _role(nxt)
    alien = own is None or (not h.exact and own not in _EXPECTED[state])
    exact = own if h.exact else None
    if state == _VALUE:
        ends = nxt is not None and after_blank and (own == VAL or alien) and (
            next_own in (KEY, CLOSE, OPEN) or (nxt.word is None and not nxt.exact))
        return VAL_END if own == VAL_END or ends else exact
    if state == _KEY:
        ends = (own == KEY or alien) and before.strip() and "\n" not in before.strip()
        return KEY_END if own == KEY_END or ends else exact
    if state == _AFTER_KEY:
        return VAL if own == VAL or (alien and not before.strip()) else exact
    if state == _CALL:
        if own == OPEN and after_blank and (nxt is None or next_own == OPEN):
            return CLOSE
        if own == VAL_END and prev_role == OPEN and after_blank and next_own in (CLOSE, OPEN):
            # a stray </arg_value> right after the name of a call without arguments (seen from GLM-5)
            put(h.start, h.end, "", f"a stray {VAL_END} after the tool name dropped")
            return None
        if alien:
            if next_own in (KEY_END, KEY) and nxt is not None and not after_blank:
                return KEY
            return CLOSE if after_blank and (nxt is None or next_own == OPEN or nxt.word is None) else None
        if own == KEY_END:  # its <arg_key> was lost: put it back before the key's line
            key_at = _line_start(text, prev_end, h.start, after_name=prev_role == OPEN)
            if key_at is None:
                return None
            put(key_at, key_at, KEY, f"missing {KEY} put back before {text[key_at : h.start].strip()[:40]!r}")
        return own
    # outside a call
    if own == KEY:  # its <tool_call> was lost: put it back before the name line above the key
        name_at = _line_start(text, prev_end, h.start, after_name=False)
        if name_at is not None and _WORD.fullmatch(text[name_at : h.start].strip()):
            put(name_at, name_at, OPEN, f"missing {OPEN} put back before {text[name_at : h.start].strip()[:40]!r}")
        return own
    if alien:
        named = next_own in (KEY, CLOSE) and nxt is not None and _WORD.fullmatch(text[h.end : nxt.start].strip())
        return OPEN if named else None
    return own


def _line_start(text: str, lo: int, hi: int, *, after_name: bool) -> int | None:
    """Where the last line of ``text[lo:hi]`` starts (spaces skipped), when it holds text; ``after_name``: not on
    the span's first line."""
    seg = text[lo:hi].rstrip()
    nl = seg.rfind("\n")
    at = skip_ws(text, lo + nl + 1)
    return at if at < lo + len(seg) and (nl >= 0 or not after_name) else None


HOOK = Hook(respell=lambda fmt, text, start: respell_by_state(SPELLER, _step, _NEXT, text, start),
            sniff=_sniff, region_start=_region_start,  # untagged: NAME, KEY, VALUE lines
            read_untagged=lambda fmt, text, start, offered: untagged_calls(fmt, text, start, offered, "", True))
