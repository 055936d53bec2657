"""Reading what is left of a sentinel format's calls when its tokens were misspelt or lost (lenient reading only).

Two helpers the sentinel formats (Mistral v11, DeepSeek, Kimi-K2, harmony) share; neither knows a format:

- :func:`respell_tokens`: a text with each look-alike of one of the format's own tokens written as the token. A
  look-alike is a token spelt with another case, ``_`` / ``-`` / ``▁`` / spaces added, dropped or swapped for each
  other, ASCII ``|`` for the full-width ``｜`` (or the reverse), ``[...]`` for ``<...>``, or the closing ``>`` or
  ``]`` lost. Only the format's own token vocabulary is matched: a token of another format is left as it is.
- :func:`bare_calls`: calls written ``NAME{...}`` (a tool name, then its JSON arguments right after it) once every
  token around them was lost: read only where the shape is unambiguous (the name a plausible identifier at the start
  of the text or of a line, or right after the call before it, and a JSON object directly after it). Prose is never
  read as a call.

Cost: one linear regular-expression pass each; JSON decoding only at the places the shape allows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from refiner.calls import ToolCall
from refiner.formats.base import Lenient
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, take_items
from refiner.formats.lenient import add_arguments_call
from refiner.formats.strict import JSON_DECODER
from refiner.formats.text import skip_ws

# Sentinel tokens between bars, ``<|call|>`` / ``<｜tool▁sep｜>`` (either bar; the brackets around may be ``<>``,
# ``[]`` or lost); and bracketed words, ``[TOOL_CALLS]``.
_BARRED = re.compile(r"[<\[]?[|｜][^\s|｜<>\[\]{}\"']{1,48}[|｜][>\]]?")
_BRACKETED = re.compile(r"\[[A-Za-z][A-Za-z_\- ]{0,30}\]")
_NOISE = re.compile(r"[\s_\-▁|｜<>\[\]]")
# Look-alikes reported per text at most (one problem each).
MAX_NOTES = 8
# Token-shaped spans looked at per text: a storm of tokens past this many is left as written (a counted bound, so a
# 200 KB storm costs what 4,096 tokens cost, whatever the machine).
MAX_SCANNED = 4096


def token_key(token: str) -> str:
    """What is left of a token once case, separators, bars and brackets are dropped."""
    return _NOISE.sub("", token).lower()


def respell_tokens(text: str, tokens: Iterable[str], out: Lenient | None = None,
                   allow: Callable[[str, str, int], bool] | None = None) -> str:
    """``text`` with every look-alike of one of ``tokens`` written as that token (each reported in ``out`` as a
    ``missing_tag`` problem: the token itself is missing). ``tokens`` are all barred (``<|x|>``) or all bracketed
    (``[X]``). ``allow(token, text, end)``: whether a look-alike of ``token`` that ends at ``end`` stands where the
    token would (by default, anywhere). Only the first :data:`MAX_SCANNED` token-shaped spans are looked at."""
    table = {token_key(t): t for t in tokens}
    pattern = _BRACKETED if all(t.startswith("[") for t in table.values()) else _BARRED
    exact = set(table.values())
    keys: dict[str, str] = {}  # look-alike -> its key (a storm repeats a few spellings)
    parts: list[str] = []
    pos = notes = 0
    for n, m in enumerate(pattern.finditer(text)):
        if n == MAX_SCANNED:
            break
        found = m.group()
        if found in exact:
            continue
        key = keys.get(found)
        if key is None:
            key = keys[found] = token_key(found)
        token = table.get(key)
        if token is None or (allow is not None and not allow(token, text, m.end())):
            continue
        parts += (text[pos : m.start()], token)
        pos = m.end()
        if out is not None and notes < MAX_NOTES:
            out.note("missing_tag", f"{token} written as {found!r}")
            notes += 1
    if not parts:
        return text
    parts.append(text[pos:])
    return "".join(parts)


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
            out.calls.append(_call(name, args))
            read += 1
            pos = skip_ws(text, end)
            m = head.match(text, pos)
            continue
        nxt = _next_head(text, at, head)
        stop = nxt.start() if nxt is not None else len(text)
        add_arguments_call(out, name, text[at:stop], at_end=nxt is None)
        read += 1
        m = nxt
    return read > 0


def _next_head(text: str, pos: int, head: re.Pattern[str]) -> re.Match[str] | None:
    """The next call after a broken one: a name right after a ``}`` (whitespace between)."""
    for brace in _BRACE.finditer(text, pos):
        m = head.match(text, brace.end())
        if m is not None:
            return m
    return None


def _call(name: str, args: dict) -> ToolCall:
    return ToolCall(name, {str(k): v for k, v in args.items()})
