"""Qwen3-Coder (and Qwen3.5) XML tool calls: one block per call,
``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>``.

Grammar, from the model's chat template and vLLM's ``qwen3coder_tool_parser.py`` / SGLang's
``qwen3_coder_detector.py``:

- blocks are separated by a newline (any text between blocks is allowed, as is prose before the first and after the
  last, and a ``<think>`` block before them); whitespace between the tags is free;
- a value is the text between ``<parameter=KEY>`` and its ``</parameter>``, less one newline at each end (the
  template writes one each side; both parsers strip them). A ``</parameter>`` closes the value only when a
  ``<parameter=`` or ``</function>`` follows it (whitespace aside) and it does not close a parameter block the value
  quotes itself (one opened at the start of a line), as in vLLM's parser: code holding the tags is read whole, and a
  value whose ``</parameter>`` was lost (the next parameter follows inside it) is not valid;
- values are typed as :mod:`refiner.formats.xmlvalues` says: strings raw, numbers in their canonical JSON text,
  booleans and null as ``True`` / ``False`` / ``None`` (the template's ``| string``; ``true`` / ``false`` / ``null``
  are read too), objects and arrays as JSON. A string that would read as something else (``42``, ``True``,
  ``{"a": 1}``) or holds ``<parameter=`` / ``</parameter>`` is written as its JSON string literal (``"42"``); a
  quoted text that escapes nothing (``"exact phrase"``) is read as written, quotes and all. With the tool specs
  known, :meth:`QwenCoder.retype` settles each value by its declared type (the gate calls it), as the published
  parsers do;
- a parameter name is written as it is, or as a JSON string literal when it holds ``>`` or a newline (never in
  practice); a name given twice is an error.

Shares ``<tool_call>`` with ``hermes`` and ``apibank``: it ranks before them and :meth:`QwenCoder.sniff` claims a
block only when ``<function=`` opens it. Recovery reads cut texts, lost tags (vLLM's fallbacks: a value ends at the
next ``<parameter=`` or ``</function>``) and JSON arguments written inside the function tags
(``<function=NAME>{...}</function>``, as Llama 3.1 writes calls).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat, register
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, lenient_json, take_items
from refiner.formats.lenient import written_before_cut
from refiner.formats.strict import JSON_DECODER
from refiner.formats.tags import MAX_TAG_HITS, Hit, Speller
from refiner.formats.text import reasoning_offset, skip_ws
from refiner.formats.xmlvalues import (
    Finder,
    mark_xml_cut,
    read_key,
    read_value,
    retype_calls,
    stops_in_call,
    strip_one_newline,
    untagged_lines,
    value_end,
    write_key,
    write_value,
)

OPEN, CLOSE = "<tool_call>", "</tool_call>"
FUNC, FUNC_END = "<function=", "</function>"
PARAM, PARAM_END = "<parameter=", "</parameter>"
VALUE_TAGS = (PARAM, PARAM_END)  # a string holding one of these is written as a JSON string literal
# A tool name: no whitespace, no angle brackets, quotes or braces (vLLM's parser rejects the same).
NAME_PATTERN = r"[^\s<>{}\"']+"
DETECT_CHARS = 2_000  # of text after a marker read to tell this format from others sharing it
NAME_LINE_CHARS = 400  # how far above its first parameter a block's start is looked for


def _is_name(name: str) -> bool:
    return bool(name) and not any(c.isspace() or c in "<>{}\"'" for c in name)


@register
class QwenCoder(WireFormat):
    name = "qwen3_coder"
    description = (
        "Qwen3-Coder XML: <tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n"
        "</tool_call> per call (strings raw, other values JSON)"
    )
    tags = (OPEN, FUNC, PARAM, PARAM_END, FUNC_END, CLOSE)
    detection = Detection(rank=51, markers=(OPEN, FUNC, PARAM), closers=(PARAM_END, FUNC_END))
    name_pattern = NAME_PATTERN
    example = (
        "<tool_call>\n<function=search_flights>\n<parameter=origin>\nNew York\n</parameter>\n"
        "<parameter=destination>\nLondon\n</parameter>\n<parameter=date>\n2024-08-15\n</parameter>\n"
        "<parameter=max_stops>\n1\n</parameter>\n</function>\n</tool_call>\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nLondon\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n<parameter=units>\nmetric\n</parameter>\n</function>\n</tool_call>"
    )

    # Detection

    def sniff(self, body: str, at: int) -> bool:
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
            close = body.find(">", at, at + DETECT_CHARS)
            if close < 0:
                return True  # cut inside the name: nothing else writes "<function=" without JSON after it
            k = skip_ws(body, close + 1)
            return k >= len(body) or body.startswith(PARAM, k) or body.startswith(FUNC_END, k)
        return True

    def region_start(self, body: str, at: int) -> int:
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

    def read_untagged(
        self, text: str, start: int, offered: Mapping[str, Sequence[str]]
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

    # Strict

    def parse_strict(self, text: str) -> list[ToolCall]:
        start = reasoning_offset(text)
        i = text.find(OPEN, start)
        if i < 0:
            raise self.error(f"no {OPEN}...{CLOSE} block", start)
        calls = []
        while i >= 0:
            pos = skip_ws(text, i + len(OPEN))
            if not text.startswith(FUNC, pos):
                raise self.error(f"expected {FUNC}NAME> after {OPEN}, got {text[pos : pos + 30]!r}", pos)
            name, pos = self._name(text, pos + len(FUNC))
            args: dict[str, Any] = {}
            while True:
                pos = skip_ws(text, pos)
                if text.startswith(FUNC_END, pos):
                    pos += len(FUNC_END)
                    break
                if not text.startswith(PARAM, pos):
                    if pos >= len(text):
                        raise self.error(f"missing {FUNC_END}", pos)
                    raise self.error(f"expected {PARAM}KEY> or {FUNC_END}, got {text[pos : pos + 30]!r}", pos)
                key, pos = self._key(text, pos + len(PARAM))
                if key in args:
                    raise self.error(f"parameter {key!r} of {name!r} given twice", pos)
                end = self._value_end(text, pos)
                args[key] = read_value(strip_one_newline(text[pos:end]), True, VALUE_TAGS)
                pos = end + len(PARAM_END)
            pos = skip_ws(text, pos)
            if not text.startswith(CLOSE, pos):
                if pos >= len(text):
                    raise self.error(f"missing {CLOSE}", pos)
                raise self.error(f"unexpected text {text[pos : pos + 30]!r} before {CLOSE}", pos)
            calls.append(ToolCall.trusted(name, args))
            i = text.find(OPEN, pos + len(CLOSE))
        return calls

    def _name(self, text: str, pos: int) -> tuple[str, int]:
        j = text.find(">", pos)
        if j < 0:
            raise self.error(f"unclosed {FUNC}", pos)
        name = text[pos:j]
        if not _is_name(name):
            raise self.error(f"tool name {name[:60]!r} is not allowed (no spaces, quotes or brackets)", pos)
        return name, j + 1

    def _key(self, text: str, pos: int) -> tuple[str, int]:
        if text.startswith('"', pos):  # a name written as a JSON string literal
            try:
                key, end = JSON_DECODER.raw_decode(text, pos)
            except (ValueError, RecursionError):
                raise self.error("a quoted parameter name is not a JSON string", pos) from None
            if type(key) is not str or not text.startswith(">", end):
                raise self.error(f"expected > after the quoted parameter name at {end}", pos)
            return key, end + 1
        j = text.find(">", pos)
        if j < 0:
            raise self.error(f"unclosed {PARAM}", pos)
        key = text[pos:j]
        if "\n" in key:
            raise self.error(f"a parameter name runs over a line: {key[:40]!r}", pos)
        return key, j + 1

    def _value_end(self, text: str, pos: int) -> int:
        """Where the ``</parameter>`` that closes the value starting at ``pos`` lies: the first one followed by
        another parameter or the end of the function, outside any parameter block the value quotes (one opened at
        the start of a line, as vLLM's parser counts them)."""
        end = value_end(text, pos, "\n" + PARAM, PARAM_END, (PARAM, FUNC_END))
        if end < 0:
            j = text.find(PARAM_END, pos)
            if j >= 0 and skip_ws(text, j + len(PARAM_END)) == len(text):
                raise self.error(f"missing {FUNC_END}", len(text))
            raise self.error(f"unclosed parameter value (no {PARAM_END} followed by {PARAM} or {FUNC_END})", pos)
        return end

    # Lenient

    def recover(self, text: str, out: Lenient) -> None:
        pos = reasoning_offset(text)
        fixed = respell(text, pos)
        if fixed is not None:
            text, notes = fixed
            for note in notes[:MAX_NOTES]:
                out.note("missing_tag", note)
        f = Finder(text)
        for n in range(MAX_RECOVERED_ITEMS + 1):
            fs = f.next(FUNC, pos)
            if fs < 0:
                if n == 0:
                    out.note("missing_tag", f"no {FUNC}NAME> found")
                return
            if not take_items(1):  # (the parse's count of items read: a gave_up problem)
                return
            o = f.next(OPEN, pos)
            if o < 0 or o > fs:
                out.note("missing_tag", f"missing {OPEN} before call #{n + 1}")
            elif skip_ws(text, o + len(OPEN)) != fs:
                out.note("unreadable", f"text skipped before {FUNC}: {text[o + len(OPEN) : fs][:60]!r}")
            pos = self._recover_call(text, fs + len(FUNC), f, out)

    def _recover_call(self, text: str, pos: int, f: Finder, out: Lenient) -> int:
        name_end, which = f.first((">", "\n"), pos)
        name = text[pos:name_end].strip()
        pos = name_end + 1 if which == ">" else name_end
        if which is None:  # cut inside the name: no call can be trusted
            out.note("unclosed", f"the text ends inside the tool name {name[:60]!r}")
            out.mark_cut(None)
            return pos
        if which != ">":
            out.note("missing_tag", f"the {FUNC}{name}> tag is not closed")
        if not _is_name(name):
            out.note("bad_name" if name else "no_name", f"tool name {name[:60]!r} is not allowed")
        args: dict[str, Any] = {}
        closed = False
        whole = pos  # where the last value written whole ends (the function tag, at first)
        cut: tuple[dict[str, Any], bool] | None = None  # the text stops inside this call: (written whole, clean)
        while pos < len(text):
            pos = skip_ws(text, pos)
            if text.startswith(FUNC_END, pos):
                pos += len(FUNC_END)
                closed = True
                break
            if text.startswith(PARAM, pos):
                if not take_items(1):  # the rest is not read: this call, read in part, is left out
                    return len(text)
                pos, cut_key = self._recover_param(text, pos + len(PARAM), f, args, out)
                if cut_key is None:
                    whole = pos
                else:  # the text ends inside this parameter's value
                    cut = {k: v for k, v in args.items() if k != cut_key}, False
                continue
            nxt, tag = f.first((PARAM, FUNC_END, FUNC, CLOSE, OPEN), pos)
            junk = text[pos:nxt]
            value = lenient_json(junk, at_end=tag is None) if junk.startswith("{") and not args else None
            if isinstance(value, dict):  # JSON arguments inside the function tags (Llama 3.1 writes calls this way)
                out.note("missing_tag", f"arguments of {name!r} written as JSON instead of {PARAM}KEY> tags")
                args.update((str(k), v) for k, v in value.items())
                cut, whole = written_before_cut(value), nxt
            elif tag in (PARAM, FUNC_END) or junk.strip():
                out.note("unreadable", f"text skipped in call {name!r}: {junk[:60]!r}")
            pos = nxt
            if tag not in (PARAM, FUNC_END):
                break
        if not closed:
            out.note("missing_tag", f"missing {FUNC_END} in call {name!r}")
        k = skip_ws(text, pos)
        if text.startswith(CLOSE, k):
            pos = k + len(CLOSE)
        else:
            out.note("missing_tag", f"missing {CLOSE} after call {name!r}")
        if name:
            out.calls.append(ToolCall(name, args))
        if not closed:
            mark_xml_cut(out, name, args, cut, stops_in_call(text, whole, FUNC_END + CLOSE, (PARAM,)))
        return pos

    def _recover_param(self, text: str, pos: int, f: Finder, args: dict, out: Lenient) -> tuple[int, str | None]:
        """Reads one parameter into ``args``: ``(where reading goes on, its key when the text ends inside its
        value, else None)``."""
        key_end, which = f.first((">", "\n"), pos)
        raw_key = text[pos:key_end]
        key = read_key(raw_key)
        key = raw_key.strip() if key is None else key
        if which != ">":
            out.note("missing_tag", f"the {PARAM}{key[:40]}> tag is not closed")
            vstart = key_end
        else:
            vstart = key_end + 1
        # the value ends at its closing tag, unless a new parameter (on a new line) or the end of the function or
        # block comes first (the closing tag was lost), or at the end of the text (cut short)
        close = f.next(PARAM_END, vstart)
        stop, tag = f.first(("\n" + PARAM, FUNC_END, CLOSE, OPEN), vstart)
        cut = False
        if 0 <= close <= stop:
            end, after = close, close + len(PARAM_END)
        else:
            end, after = stop, stop
            if tag is None:
                out.note("unclosed", f"parameter {key[:40]!r} cut short")
                cut = True
            else:
                out.note("missing_tag", f"missing {PARAM_END} after parameter {key[:40]!r}")
                if tag != "\n" + PARAM and text.startswith("\n\n", end - 2):
                    end -= 1  # the template's newlines on both sides of the lost tag: "\n</parameter>\n"
        if key in args:
            out.note("bad_argument", f"parameter {key[:40]!r} given twice: the last value kept")
        args[key] = read_value(strip_one_newline(text[vstart:end]), True, VALUE_TAGS)
        return after, key if cut else None

    # Render

    def render(self, calls: Sequence[ToolCall]) -> str:
        blocks = []
        for c in calls:
            lines = [f"{OPEN}\n{FUNC}{c.name}>"]
            for k, v in c.arguments.items():
                key = write_key(k, ">" not in k and "\n" not in k and "\r" not in k)
                lines.append(f"{PARAM}{key}>\n{write_value(v, VALUE_TAGS, python_literals=True)}\n{PARAM_END}")
            lines.append(f"{FUNC_END}\n{CLOSE}")
            blocks.append("\n".join(lines))
        return "\n".join(blocks)

    # Typing by the tool specs

    def retype(self, calls: Sequence[ToolCall], tools: Mapping[str, Any]) -> list[ToolCall]:
        return retype_calls(calls, tools, python_literals=True)


# ----------------------------------------------------------------------------------------------------------------
# Tags written wrong (lenient reading only)

SPELLER = Speller(QwenCoder.tags)
MAX_NOTES = 8  # problems reported per text for tags read in place of others
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
            if not alien:
                role = own
            elif h.exact:
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
