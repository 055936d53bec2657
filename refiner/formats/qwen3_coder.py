"""The hook of the ``qwen3_coder`` row of the XML parameter grammar (:data:`HOOK`; Qwen3-Coder, Qwen3.5:
``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>``)."""

from __future__ import annotations

import re
from collections.abc import Callable

from refiner.formats.base import ROW_CHARS, WireFormat
from refiner.formats.tags import Hit, Speller, respell_by_state
from refiner.formats.text import skip_ws
from refiner.formats.xml_spelling import NAME_LINE_CHARS, Hook, name_line
from refiner.formats.xmlvalues import untagged_calls

OPEN, CLOSE = "<tool_call>", "</tool_call>"
FUNC, FUNC_END = "<function=", "</function>"
PARAM, PARAM_END = "<parameter=", "</parameter>"
TAGS = (OPEN, FUNC, PARAM, PARAM_END, FUNC_END, CLOSE)


def _sniff(fmt: WireFormat, body: str, at: int) -> bool:
    """A ``<tool_call>`` whose block opens with ``<function=`` (or a look-alike, or ``NAME>`` and a parameter); a
    bare ``<function=NAME>`` followed by a parameter or ``</function>`` (not by Llama's JSON); a bare
    ``<parameter=``."""
    if body.startswith(OPEN, at):
        k = skip_ws(body, at + len(OPEN))
        if body.startswith(FUNC, k):
            return True
        if body.startswith("{", k):
            return False  # a JSON object (Hermes' block): neither a tag nor a name
        # <function= written wrong (the tag token at k), or lost: NAME> and a parameter or the end
        hit = next(SPELLER.scan(body, k, k + 1), None) if body.startswith(("<", "["), k) else None
        if hit is not None and _role(hit) == FUNC:
            return True
        m = _LABEL.match(body, hit.end if hit is not None and hit.word is None else k)
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

SPELLER = Speller(TAGS)
# Where the reader stands: outside a block, after <tool_call>, in a function's body, in a value, after </function>.
_OUT, _BLOCK, _BODY, _VALUE, _AFTER_FUNC = range(5)
_EXPECTED = {_OUT: (OPEN, FUNC), _BLOCK: (FUNC,), _BODY: (PARAM, FUNC_END), _VALUE: (PARAM_END,),
             _AFTER_FUNC: (CLOSE, OPEN)}
_NEXT = {OPEN: _BLOCK, FUNC: _BODY, PARAM: _VALUE, PARAM_END: _BODY, FUNC_END: _AFTER_FUNC, CLOSE: _OUT}
_LABEL = re.compile(r"[^\s<>{}\"'=]+>")  # what follows <function= or <parameter=: a name and its ">"


def _role(hit: Hit | None) -> str | None:
    """The tag a token spells as written (``None``: another format's tag, no token, or a name tag that lost both its
    ``=`` and its ``>``)."""
    if hit is None or hit.word is None:
        return None
    if hit.word == "tool_call":
        return CLOSE if hit.closing else OPEN
    end = FUNC_END if hit.word == "function" else PARAM_END
    if hit.eq and not hit.closing:
        return FUNC if hit.word == "function" else PARAM
    return end if hit.closing or hit.ended else None


def _step(text: str, state: int, h: Hit, nxt: Hit | None, prev_end: int, prev_role: str | None,
          put: Callable[[int, int, str, str], None]) -> str | None:
    """The tag the token ``h`` is read as where the grammar stands (``None``: text), for the hook's respelling
    (:func:`~refiner.formats.tags.respell_by_state`): a look-alike of a tag is that tag (``<parameter>`` without its
    ``=`` the closing one); another format's tag, or a look-alike not allowed there, is the tag expected there when
    what follows fits it (a ``NAME>`` or ``KEY>``, or only the next tag), else text; a lost ``<function=``
    (``<parameter=``) is put back before the ``NAME>`` line a block opens with (the ``KEY>`` line a ``</parameter>``
    closes)."""
    after = text[h.end : nxt.start if nxt else len(text)]
    after_blank = not after.strip()
    own, next_own = _role(h), _role(nxt)
    alien = own is None or (not h.exact and own not in _EXPECTED[state])
    exact = own if h.exact else None
    if prev_role in (FUNC, PARAM) and (m := _LABEL.match(text, prev_end)):
        prev_end = m.end()  # the name or key that follows, and its ">"
    if state == _VALUE:
        ends = alien and nxt is not None and after_blank and (
            next_own in (PARAM, FUNC_END, CLOSE) or (nxt.word is None and not nxt.exact))
        return PARAM_END if own == PARAM_END or ends else exact
    labelled = _LABEL.match(after) is not None and "\n" not in after[: after.find(">")]
    if state == _BODY:
        if alien:
            if labelled:
                return PARAM
            return FUNC_END if after_blank and (nxt is None or next_own in (CLOSE, OPEN) or nxt.word is None) else None
        if own == PARAM_END:  # its <parameter= was lost: put it back before the KEY> line
            at = skip_ws(text, prev_end)
            m = _LABEL.match(text, at)
            if m is not None and text.startswith("\n", m.end()):
                put(at, at, PARAM, f"missing {PARAM} put back before {text[at : m.end()][:40]!r}")
            elif not h.exact:
                return None
        return own
    if state == _BLOCK:
        if own in (PARAM, FUNC_END) and h.exact:  # its <function= was lost: put it back before NAME>
            at = skip_ws(text, prev_end)
            m = _LABEL.match(text, at)
            if m is not None and not text[m.end() : h.start].strip():
                put(at, at, FUNC, f"missing {FUNC} put back before {text[at : m.end()][:40]!r}")
            return own
        return own if not alien else FUNC if labelled else exact
    if state == _AFTER_FUNC:
        if own == OPEN and after_blank and (nxt is None or next_own == OPEN):
            return CLOSE
        return own if not alien else CLOSE if after_blank else None
    return own if not alien or h.exact else None  # outside a block


HOOK = Hook(respell=lambda fmt, text, start: respell_by_state(SPELLER, _step, _NEXT, text, start),
            sniff=_sniff, region_start=_region_start,  # untagged: NAME>, KEY>, value lines
            read_untagged=lambda fmt, text, start, offered: untagged_calls(fmt, text, start, offered, ">", False))
