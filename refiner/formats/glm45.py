"""GLM-4.5 / GLM-4.6 (and GLM-4.7 / GLM-5): the hook of the ``glm45`` row of the XML parameter grammar
(:mod:`refiner.formats.xml_grammar`, which reads and writes it:
``<tool_call>NAME\\n<arg_key>KEY</arg_key>\\n<arg_value>VALUE</arg_value>\\n...</tool_call>``).

Grammar, from the GLM-4.5 chat template and vLLM's ``glm4_moe_tool_parser.py`` / ``glm47_moe_tool_parser.py`` and
SGLang's ``glm4_moe_detector.py``:

- the tool name runs from ``<tool_call>`` to the first newline, ``<arg_key>`` or ``</tool_call>`` (GLM-4.5/4.6 write
  a newline after it, GLM-4.7 and later none: the same grammar), surrounding spaces dropped;
- then ``<arg_key>KEY</arg_key>`` / ``<arg_value>VALUE</arg_value>`` pairs, whitespace between tags free (the 4.5
  template puts newlines there); blocks are separated by a newline, reasoning (``<think>...</think>``) and prose may
  come before, prose after;
- the template writes a string value as it is and any other value as JSON (``tojson``): values are typed as
  :mod:`refiner.formats.xmlvalues` says. A string that would read as something else (``42``, ``true``) or holds
  ``<arg_value>`` / ``</arg_value>`` is written as its JSON string literal (``"42"``);
- a ``</arg_value>`` closes the value only when ``<arg_key>`` or ``</tool_call>`` follows it (whitespace aside) and
  it does not close an ``<arg_value>`` the value quotes itself; a parameter given twice is an error.

What the row's table cannot say lives here, as the row's hook (:data:`HOOK`, its spelling's ``hook``): detection against
the formats sharing ``<tool_call>`` (:func:`_sniff`: a block that opens with a tool name rather than JSON), where a
region found by a lost ``<tool_call>`` starts, calls whose tags a decoder dropped (:func:`_read_untagged`), and the
repair of tags written wrong (:func:`respell`). The row ranks after ``qwen3_coder`` and before the JSON formats sharing
the tag.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import ROW_CHARS, SPACED_NAME_PATTERN, WireFormat
from refiner.formats.tags import MAX_TAG_HITS, Hit, Speller
from refiner.formats.text import skip_ws
from refiner.formats.xml_spelling import NAME_LINE_CHARS, Hook
from refiner.formats.xmlvalues import read_value, untagged_lines

OPEN, CLOSE = "<tool_call>", "</tool_call>"
KEY, KEY_END = "<arg_key>", "</arg_key>"
VAL, VAL_END = "<arg_value>", "</arg_value>"
TAGS = (OPEN, KEY, KEY_END, VAL, VAL_END, CLOSE)
VALUE_TAGS = (VAL, VAL_END)  # a string holding one of these is written as a JSON string literal
_NAME = re.compile(SPACED_NAME_PATTERN)


def _is_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def _sniff(fmt: WireFormat, body: str, at: int) -> bool:
    """A ``<tool_call>`` block that opens with a tool name (then a newline, ``<arg_key>`` or the block's end), or
    with anything but JSON and holds one of the key and value tags; not one that opens with JSON or
    ``<function=``. A bare ``<arg_key>`` is this format's."""
    if not body.startswith(OPEN, at):
        return True
    k = skip_ws(body, at + len(OPEN))
    seg = body[k : k + ROW_CHARS]
    if seg.startswith(KEY):
        return True
    if not seg or seg[0] in "{[\"'<":
        return False
    block, closed, _ = seg.partition(CLOSE)
    if any(tag in block for tag in (KEY, KEY_END, VAL, VAL_END)):
        return True
    if not closed:
        return False  # a name line alone, never closed: prose mentioning the tag, not a call
    nl = block.find("\n")
    e = nl if nl >= 0 else len(block)
    rest, name = block[e:].strip(), block[:e].strip()
    # a name alone (an argument-less call) is claimed only when it is one word: "<tool_call>not valid json
    # </tool_call>" is junk in Hermes' tag, not a GLM call (a GLM reader asked by name still reads spaced names)
    return _is_name(name) and not rest and not any(c.isspace() for c in name)

def _region_start(fmt: WireFormat, body: str, at: int) -> int:
    """A region found by an ``<arg_key>`` (its ``<tool_call>`` lost or written wrong) starts at the call's name:
    on the line above the key (GLM-4.5/4.6), or before the key on its line (GLM-4.7), with what stands before the
    name on that line (a tag written wrong)."""
    if body.startswith(OPEN, at):
        return at
    line = body.rfind("\n", 0, at) + 1
    if not body[line:at].strip() and line > 0:
        line = body.rfind("\n", 0, line - 1) + 1
    return line if at - line <= NAME_LINE_CHARS else at

def _read_untagged(
    fmt: WireFormat, text: str, start: int, offered: Mapping[str, Sequence[str]]
) -> tuple[int, int, list[ToolCall]] | None:
    """GLM's calls with every tag dropped (its tags are special tokens: a decoder that skips them leaves
    ``NAME\\nKEY\\nVALUE\\n...``, a blank line between calls), read by the offered tools alone: from the first line
    that names an offered tool and is followed by one of its parameters, calls made of such a name line, then
    lines alternating a parameter of that tool (each once) and its value (one line; an empty one is an empty
    string), up to a blank line; blank lines between calls, and nothing after the last one. A call with no
    argument, a value over several lines, or any other line, and this is not such a text."""
    lines = untagged_lines(text, start)
    if lines is None:
        return None
    i = next((k for k, (_, _, ln) in enumerate(lines[:-1])
              if ln in offered and lines[k + 1][2] in offered[ln]), None)
    if i is None:
        return None
    first, calls, end = lines[i][0], [], lines[i][1]
    while i < len(lines):
        if not lines[i][2].strip():
            i += 1
            continue
        name = lines[i][2]
        params = set(offered.get(name) or ())
        args: dict[str, Any] = {}
        i += 1
        while i < len(lines) and lines[i][2] in params and lines[i][2] not in args and i + 1 < len(lines):
            args[lines[i][2]] = read_value(lines[i + 1][2], tags=VALUE_TAGS)
            end = lines[i + 1][1]
            i += 2
        if not args or not (i == len(lines) or not lines[i][2].strip()):
            return None
        calls.append(ToolCall(name, args))
    return first, end, calls

# Strict


# ----------------------------------------------------------------------------------------------------------------
# Tags written wrong (lenient reading only)

SPELLER = Speller(TAGS)
_ROLE = {("tool_call", False): OPEN, ("tool_call", True): CLOSE, ("arg_key", False): KEY, ("arg_key", True): KEY_END,
         ("arg_value", False): VAL, ("arg_value", True): VAL_END}
# Where the reader stands: outside a call, in a call between its parts, in a key, after a key, in a value.
_OUT, _CALL, _KEY, _AFTER_KEY, _VALUE = range(5)
_EXPECTED = {_OUT: (OPEN, CLOSE, KEY), _CALL: (KEY, CLOSE, OPEN, KEY_END), _KEY: (KEY_END,), _AFTER_KEY: (VAL,),
             _VALUE: (VAL_END,)}
_NEXT = {OPEN: _CALL, CLOSE: _OUT, KEY: _KEY, KEY_END: _AFTER_KEY, VAL: _VALUE, VAL_END: _CALL}


def _role(hit: Hit | None) -> str | None:
    """The tag a token spells as written (``None``: another format's tag, or no token)."""
    return None if hit is None or hit.word is None else _ROLE[hit.word, hit.closing]


def respell(text: str, start: int) -> tuple[str, list[str]] | None:
    """The text with its tags written as the grammar has them, where they were written wrong
    (:mod:`refiner.formats.tags`) or one was lost that the rest of the text places exactly, and what was changed;
    ``None`` when nothing was. Each tag token is read where the grammar stands when it comes:

    - a look-alike of a tag is that tag; a look-alike of an opening tag where its closing tag belongs (in a key, or
      at the end of a value that the next tag ends) is the closing tag, as is a ``<tool_call>`` with no name after
      it ending a call;
    - another format's tag is the tag the grammar expects there: ``<tool_call>`` when a name line and a key follow
      it, ``<arg_key>`` when a key and ``</arg_key>`` follow it, ``</arg_key>`` after a key, ``<arg_value>`` right
      after ``</arg_key>``, ``</arg_value>`` when the next tag follows it, ``</tool_call>`` in a call when nothing
      but the next call follows; anywhere else it is text;
    - a lost ``<tool_call>`` before a block's first key is put back before the name line above that key (one word
      alone on its line), a lost ``<arg_key>`` before the key line that ``</arg_key>`` closes;
    - a ``</arg_value>`` right after a call's name with only the call's end after it is dropped.

    What the reader then makes of the text (a value still unclosed, a call cut short) is unchanged."""
    hits = list(itertools.islice(SPELLER.scan(text, start), MAX_TAG_HITS + 1))
    if len(hits) > MAX_TAG_HITS:  # a tag storm, not an answer: read as written
        return None
    edits: list[tuple[int, int, str]] = []  # (start, end, new text), in order
    notes: list[str] = []
    state = _OUT
    prev_end, prev_role = start, None
    for i, h in enumerate(hits):
        nxt = hits[i + 1] if i + 1 < len(hits) else None
        before = text[prev_end : h.start]
        after_blank = not text[h.end : nxt.start if nxt else len(text)].strip()
        own, next_own = _role(h), _role(nxt)
        # a token that is not the format's own tag written exactly, nor a look-alike of a tag the grammar allows here,
        # stands for the tag the grammar expects (or is text)
        alien = own is None or (not h.exact and own not in _EXPECTED[state])
        role: str | None = None
        if state == _VALUE:
            if own == VAL_END or (
                nxt is not None and after_blank and (own == VAL or alien)
                and (next_own in (KEY, CLOSE, OPEN) or (nxt.word is None and not nxt.exact))
            ):
                role = VAL_END
            elif h.exact:
                role = own
        elif state == _KEY:
            if own == KEY_END or ((own == KEY or alien) and before.strip() and "\n" not in before.strip()):
                role = KEY_END
            elif h.exact:
                role = own
        elif state == _AFTER_KEY:
            if own == VAL or (alien and not before.strip()):
                role = VAL
            elif h.exact:
                role = own
        elif state == _CALL:
            if own == OPEN and after_blank and (nxt is None or next_own == OPEN):
                role = CLOSE
            elif own == VAL_END and prev_role == OPEN and after_blank and next_own in (CLOSE, OPEN):
                edits.append((h.start, h.end, ""))  # a stray </arg_value> right after the name of a call without
                notes.append(f"a stray {VAL_END} after the tool name dropped")  # arguments (seen from GLM-5)
                continue
            elif alien:
                if next_own in (KEY_END, KEY) and nxt is not None and not after_blank:
                    role = KEY
                elif after_blank and (nxt is None or next_own == OPEN or nxt.word is None):
                    role = CLOSE
            else:
                role = own
                if own == KEY_END:  # its <arg_key> was lost: put it back before the key's line
                    key_at = _line_start(text, prev_end, h.start, after_name=prev_role == OPEN)
                    if key_at is not None:
                        edits.append((key_at, key_at, KEY))
                        notes.append(f"missing {KEY} put back before {text[key_at : h.start].strip()[:40]!r}")
                    else:
                        role = None
        else:  # outside a call
            if own == KEY:  # its <tool_call> was lost: put it back before the name line above the key
                name_at = _line_start(text, prev_end, h.start, after_name=False)
                if name_at is not None and _is_word(text[name_at : h.start].strip()):
                    edits.append((name_at, name_at, OPEN))
                    notes.append(f"missing {OPEN} put back before {text[name_at : h.start].strip()[:40]!r}")
                role = own
            elif alien:
                if next_own in (KEY, CLOSE) and nxt is not None and _is_word(text[h.end : nxt.start].strip()):
                    role = OPEN
            else:
                role = own
        if role is None:
            continue  # text of the value or prose, as written
        if role != text[h.start : h.end]:
            edits.append((h.start, h.end, role))
            notes.append(f"tag {text[h.start : h.end][:40]!r} read as {role}")
        state = _NEXT[role]
        prev_end, prev_role = h.end, role
    if not edits:
        return None
    parts, pos = [], 0
    for a, b, new in edits:
        parts += [text[pos:a], new]
        pos = b
    parts.append(text[pos:])
    return "".join(parts), notes


def _is_word(name: str) -> bool:
    """A tool name that stands on its line alone: one word, not prose."""
    return bool(name) and " " not in name and _is_name(name)


def _line_start(text: str, lo: int, hi: int, *, after_name: bool) -> int | None:
    """Where the last line of ``text[lo:hi]`` starts (spaces skipped), when it holds text; ``after_name``: the span
    opens with a call's name line, which must end before that line."""
    seg = text[lo:hi].rstrip()
    nl = seg.rfind("\n")
    if after_name and nl < 0:
        return None
    at = skip_ws(text, lo + nl + 1)
    return at if at < lo + len(seg) else None


HOOK = Hook(respell=lambda fmt, text, start: respell(text, start), sniff=_sniff,
            region_start=_region_start, read_untagged=_read_untagged)
