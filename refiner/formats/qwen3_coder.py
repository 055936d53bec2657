"""Qwen3-Coder (and Qwen3.5): the hook of the ``qwen3_coder`` row of the XML parameter grammar
(:mod:`refiner.formats.xml_grammar`, which reads and writes it:
``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>``).

Grammar, from the model's chat template and vLLM's ``qwen3coder_tool_parser.py`` / SGLang's
``qwen3_coder_detector.py``:

- blocks are separated by a newline (any text between blocks is allowed, as is prose before the first and after the
  last, and a ``<think>`` block before them); whitespace between the tags is free;
- a value is the text between ``<parameter=KEY>`` and its ``</parameter>``, less one newline at each end (the
  template writes one each side; both parsers strip them). A ``</parameter>`` closes the value only when a
  ``<parameter=`` or ``</function>`` follows it (whitespace aside) and it does not close a parameter block the value
  quotes itself (one opened at the start of a line), as in vLLM's parser;
- values are typed as :mod:`refiner.formats.xmlvalues` says: strings raw, numbers in their canonical JSON text,
  booleans and null as ``True`` / ``False`` / ``None`` (the template's ``| string``), objects and arrays as JSON.
  ``true`` / ``false`` / ``null`` are text, which the tool specs settle (a boolean parameter's ``true`` is ``True``,
  a string parameter's is ``"true"``: :meth:`~refiner.formats.xml_grammar.XmlParams.retype`); a string that would
  read as something else (``42``, ``True``, ``{"a": 1}``) or holds ``<parameter=`` / ``</parameter>`` is written as
  its JSON string literal (``"42"``);
- a parameter name is written as it is, or as a JSON string literal when it holds ``>`` or a newline (never in
  practice); a name given twice is an error.

What the row's table cannot say lives here, as the row's hook (:data:`HOOK`, its spelling's ``hook``): detection against
the formats sharing ``<tool_call>`` (:func:`_sniff`: a block opening with ``<function=`` or a look-alike), where a
region found by a ``<parameter=`` starts, calls whose tags a decoder dropped (:func:`_read_untagged`) and the repair of
tags written wrong (:func:`respell`). Recovery (the grammar's) reads cut texts, lost tags (vLLM's fallbacks: a value
ends at the next ``<parameter=`` or ``</function>``) and JSON arguments written inside the function tags.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import ROW_CHARS, WireFormat
from refiner.formats.tags import MAX_TAG_HITS, Hit, Speller
from refiner.formats.text import skip_ws
from refiner.formats.xml_spelling import NAME_LINE_CHARS, Hook
from refiner.formats.xmlvalues import read_value, untagged_lines

OPEN, CLOSE = "<tool_call>", "</tool_call>"
FUNC, FUNC_END = "<function=", "</function>"
PARAM, PARAM_END = "<parameter=", "</parameter>"
TAGS = (OPEN, FUNC, PARAM, PARAM_END, FUNC_END, CLOSE)
VALUE_TAGS = (PARAM, PARAM_END)  # a string holding one of these is written as a JSON string literal


def _sniff(fmt: WireFormat, body: str, at: int) -> bool:
    """A ``<tool_call>`` whose block opens with ``<function=`` (or a look-alike, or ``NAME>`` and a parameter
    where it was lost or another format's tag stands for it); a bare ``<function=NAME>`` followed by a
    ``<parameter=`` or ``</function>`` (not by JSON, as in Llama's ``<function=NAME>{...}``); a bare
    ``<parameter=``."""
    if body.startswith(OPEN, at):
        k = skip_ws(body, at + len(OPEN))
        if body.startswith(FUNC, k):
            return True
        hit = SPELLER.at(body, k)  # <function= written wrong, or lost: NAME> and a parameter or the end
        if hit is not None and _role(hit) == FUNC:
            return True
        m = _LABEL.match(body, hit.end if hit is not None and hit.word is None else k)
        return m is not None and body.startswith((PARAM, FUNC_END), skip_ws(body, m.end()))
    if body.startswith(FUNC, at):
        close = body.find(">", at, at + ROW_CHARS)
        if close < 0:
            return True  # cut inside the name: nothing else writes "<function=" without JSON after it
        k = skip_ws(body, close + 1)
        return k >= len(body) or body.startswith(PARAM, k) or body.startswith(FUNC_END, k)
    return True

def _region_start(fmt: WireFormat, body: str, at: int) -> int:
    """A region found by a ``<parameter=`` or ``<function=`` whose block :meth:`sniff` did not claim (its
    ``<function=`` written wrong or lost) starts at that block's ``<tool_call>``, else at the line above the
    parameter (the function's line)."""
    if body.startswith(OPEN, at):
        return at
    lo = max(0, at - NAME_LINE_CHARS)
    o = body.rfind(OPEN, lo, at)
    if o >= 0 and body.find(CLOSE, o, at) < 0:
        return o
    if not body.startswith(PARAM, at):
        return at
    line = body.rfind("\n", 0, at) + 1
    if not body[line:at].strip() and line > 0:
        line = body.rfind("\n", 0, line - 1) + 1
    return line if line >= lo else at

def _read_untagged(
    fmt: WireFormat, text: str, start: int, offered: Mapping[str, Sequence[str]]
) -> tuple[int, int, list[ToolCall]] | None:
    """The calls with every tag dropped (``NAME>``, then ``KEY>`` and the value's lines, blank lines where the
    closing tags were), read by the offered tools alone: from the first line ``NAME>`` naming an offered tool
    that is followed by a line ``KEY>`` for one of its parameters, calls made of such a name line and parameter
    lines (each parameter once), a value running from the line after its ``KEY>`` to the next such line (the
    blank lines the lost tags leave at its end dropped, and the template's newline at its start). A call with no
    argument, or other text before a call's first parameter, and this is not such a text."""
    lines = untagged_lines(text, start)
    if lines is None:
        return None
    names = {f"{n}>": n for n in offered}

    def keys_of(name: str) -> dict[str, str]:
        return {f"{k}>": k for k in offered.get(name) or ()}

    i = next((k for k, (_, _, ln) in enumerate(lines[:-1]) if ln in names and lines[k + 1][2] in
              keys_of(names[ln])), None)
    if i is None:
        return None
    first, calls, end = lines[i][0], [], lines[i][1]
    while i < len(lines):
        if not lines[i][2].strip():
            i += 1
            continue
        if lines[i][2] not in names:
            return None
        name = names[lines[i][2]]
        keys = keys_of(name)
        args: dict[str, Any] = {}
        i += 1
        while i < len(lines) and lines[i][2] in keys and keys[lines[i][2]] not in args:
            key = keys[lines[i][2]]
            j = i + 1
            while j < len(lines) and not (lines[j][2] in names or (lines[j][2] in keys and keys[lines[j][2]]
                                                                    not in args and keys[lines[j][2]] != key)):
                j += 1
            last = j - 1
            while last > i and not lines[last][2].strip():
                last -= 1
            if last == i:  # no value line: an empty value is written as a blank line
                value = ""
            else:
                value = text[lines[i + 1][0] : lines[last][1]]
                end = lines[last][1]
            args[key] = read_value(value, True, VALUE_TAGS)
            i = j
        if not args:
            return None
        calls.append(ToolCall(name, args))
    return first, end, calls



# ----------------------------------------------------------------------------------------------------------------
# Tags written wrong (lenient reading only)

SPELLER = Speller(TAGS)
# Where the reader stands: outside a block, after <tool_call>, in a function's body (between its parameters), in a
# value, after </function>.
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


def respell(text: str, start: int) -> tuple[str, list[str]] | None:
    """The text with its tags written as the grammar has them, where they were written wrong
    (:mod:`refiner.formats.tags`) or one was lost that the rest of the text places exactly, and what was changed;
    ``None`` when nothing was. Each tag token is read where the grammar stands when it comes:

    - a look-alike of a tag is that tag (``<PARAMETER=``, ``[function=``, ``</para_meter>``), a name tag without
      its ``=`` (``<parameter>``) the closing one; an opening ``<tool_call>`` right after ``</function>`` with
      nothing but the next block after it is ``</tool_call>``;
    - another format's tag, or a look-alike of a tag the grammar does not allow there, is the tag the grammar
      expects: ``<function=`` after ``<tool_call>`` when a ``NAME>`` follows it, ``<parameter=`` in a function's
      body when a ``KEY>`` follows it, ``</parameter>`` at the end of a value when the next tag follows it,
      ``</function>`` in a body and ``</tool_call>`` after it when only the next tag follows; anywhere else it is
      text;
    - a lost ``<function=`` before the ``NAME>`` line a block opens with, and a lost ``<parameter=`` before the
      ``KEY>`` line a value's ``</parameter>`` closes, are put back.

    What the reader then makes of the text (a value still unclosed, a call cut short) is unchanged."""
    hits = list(itertools.islice(SPELLER.scan(text, start), MAX_TAG_HITS + 1))
    if len(hits) > MAX_TAG_HITS:  # a tag storm, not an answer: read as written
        return None
    edits: list[tuple[int, int, str]] = []  # (start, end, new text), in order
    notes: list[str] = []
    state = _OUT
    prev_end = start
    for i, h in enumerate(hits):
        nxt = hits[i + 1] if i + 1 < len(hits) else None
        after = text[h.end : nxt.start if nxt else len(text)]
        after_blank = not after.strip()
        own, next_own = _role(h), _role(nxt)
        alien = own is None or (not h.exact and own not in _EXPECTED[state])
        labelled = _LABEL.match(after) is not None and "\n" not in after[: after.find(">")]
        role: str | None = None
        if state == _VALUE:
            if own == PARAM_END or (
                alien and nxt is not None and after_blank
                and (next_own in (PARAM, FUNC_END, CLOSE) or (nxt.word is None and not nxt.exact))
            ):
                role = PARAM_END
            elif h.exact:
                role = own
        elif state == _BODY:
            if not alien:
                role = own
                if own == PARAM_END:  # its <parameter= was lost: put it back before the KEY> line
                    at = skip_ws(text, prev_end)
                    m = _LABEL.match(text, at)
                    if m is not None and text.startswith("\n", m.end()):
                        edits.append((at, at, PARAM))
                        notes.append(f"missing {PARAM} put back before {text[at : m.end()][:40]!r}")
                        role = PARAM_END
                    else:
                        role = None if not h.exact else own
            elif labelled:
                role = PARAM
            elif after_blank and (nxt is None or next_own in (CLOSE, OPEN) or nxt.word is None):
                role = FUNC_END
        elif state == _BLOCK:
            if own in (PARAM, FUNC_END) and h.exact:  # its <function= was lost: put it back before NAME>
                at = skip_ws(text, prev_end)
                m = _LABEL.match(text, at)
                if m is not None and not text[m.end() : h.start].strip():
                    edits.append((at, at, FUNC))
                    notes.append(f"missing {FUNC} put back before {text[at : m.end()][:40]!r}")
                role = own
            elif not alien:
                role = own
            elif labelled:
                role = FUNC
            elif h.exact:
                role = own
        elif state == _AFTER_FUNC:
            if own == OPEN and after_blank and (nxt is None or next_own == OPEN):
                role = CLOSE
            elif not alien:
                role = own
            elif after_blank:
                role = CLOSE
        else:  # outside a block
            if not alien or h.exact:
                role = own
        if role is None:
            continue  # text of a value or prose, as written
        if role != text[h.start : h.end]:
            edits.append((h.start, h.end, role))
            notes.append(f"tag {text[h.start : h.end][:40]!r} read as {role}")
        state = _NEXT[role]
        prev_end = h.end
        if role in (FUNC, PARAM):  # the name or key that follows, and its ">"
            m = _LABEL.match(text, h.end)
            if m is not None:
                prev_end = m.end()
    if not edits:
        return None
    edits.sort(key=lambda e: e[0])
    parts, pos = [], 0
    for a, b, new in edits:
        parts += [text[pos:a], new]
        pos = b
    parts.append(text[pos:])
    return "".join(parts), notes


HOOK = Hook(respell=lambda fmt, text, start: respell(text, start), sniff=_sniff,
            region_start=_region_start, read_untagged=_read_untagged)
