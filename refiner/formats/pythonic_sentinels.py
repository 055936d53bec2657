"""Pythonic call lists inside a model's own sentinel tokens: one grammar, a :class:`Wrapper` per catalog row
(Llama 4's ``<|python_start|>[f(a=1)]<|python_end|>``, LFM2's ``<|tool_call_start|>...`` also holding JSON calls,
OLMo 3's ``<function_calls>`` with one call per line, SGLang's multi_format python lines in ``<tool_call>``).

Calls are read by :mod:`refiner.formats.pythonic`, a broken list by ``toolace``'s recovery. Text may come before and
after the sentinels; a closing token inside a string value is text (the next one is tried).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, FormatError, Lenient, WireFormat, offered_tools
from refiner.formats.family import POLICY
from refiner.formats.jsonfix import budget_spent
from refiner.formats.lenient import add_call, as_items, lenient_json_in_prose
from refiner.formats.pythonic import IDENTIFIER_NAME, PythonicWriter, looks_pythonic, render_call, strict_call_list
from refiner.formats.pythonic_scan import after_opening_tag, list_start, matching_paren
from refiner.formats.strict import strict_fields, strict_json
from refiner.formats.text import reasoning_offset, skip_ws
from refiner.formats.toolace import recover_list

MAX_CLOSE_TRIES = 4  # closing tokens strict parsing tries for one block (one may sit inside a string value)
MAX_BLOCKS = 64  # blocks read per text
MAX_LINES = 512  # lines of a one-call-per-line block read by recovery
MAX_RECOVERED_BLOCKS = 16  # blocks recovery reads (each may cost an ast parse)
# Characters of a one-call-per-line body matched for parentheses in all; of a line looked at for a call's start.
MAX_SPLIT_CHARS = 16_384
MAX_NAME_CHARS = 256


@dataclass(frozen=True)
class Wrapper:
    open: str
    close: str
    lines: bool = False  # one call per line instead of a [...] list
    close_optional: bool = field(default=False, metadata=POLICY)  # the end token may be missing at the text's end
    bare: bool = field(default=False, metadata=POLICY)  # a bare [...] list that is the whole answer is valid too
    json_ok: bool = field(default=False, metadata=POLICY)  # a JSON list of {"name", "arguments"} objects too (LFM2)
    shared: bool = field(default=False, metadata=POLICY)  # other rows write the open token too: see sniff


class SentinelPythonic(PythonicWriter, WireFormat):
    """The grammar: a pythonic call list (or one call per line) between the ``open`` and ``close`` of its row's
    :class:`Wrapper` (the rows: :mod:`refiner.formats.catalog`)."""

    spelling: Wrapper
    name_pattern = IDENTIFIER_NAME
    pythonic = True

    @classmethod
    def tags_for(cls, w: Wrapper) -> tuple[str, ...]:
        return (w.open, w.close)

    @classmethod
    def detection_for(cls, w: Wrapper, rank: int) -> Detection:
        return Detection(rank=rank, markers=(w.open,), closers=(w.close,), bare=w.bare)

    def sniff(self, body: str, at: int) -> bool:
        """A ``shared`` row claims a block only when a pythonic call (not a list, not JSON) starts it."""
        w = self.spelling
        if not w.shared or not body.startswith(w.open, at):
            return True
        k = skip_ws(body, at + len(w.open))
        head = body[k : k + MAX_NAME_CHARS]
        return not head.startswith("[") and looks_pythonic(head)

    # ---- reading -----------------------------------------------------------------------------------------------

    def _body_calls(self, text: str, a: int, b: int) -> list[ToolCall]:
        body = text[a:b]
        src = body.strip()
        offset = a + len(body) - len(body.lstrip())
        if self.spelling.json_ok and src.startswith("[") and src[1:].lstrip().startswith("{"):
            return [ToolCall.trusted(*strict_fields(self, item, offset, what="call", index=i)[:2])
                    for i, item in enumerate(strict_json(self, src, offset))]
        if self.spelling.lines:  # (no line: "[]")
            src = "[" + ", ".join(ln.strip() for ln in src.split("\n") if ln.strip()) + "]"
        return strict_call_list(self, src, offset)

    def _block(self, text: str, i: int) -> tuple[list[ToolCall], int]:
        """The calls of the block whose open token is at ``i`` and the position after its close token."""
        w = self.spelling
        a = i + len(w.open)
        b = text.find(w.close, a)
        if b < 0:
            if w.close_optional:
                return self._body_calls(text, a, len(text)), len(text)
            raise self.error(f"{w.open} without {w.close}", i)
        error: FormatError | None = None
        for _ in range(MAX_CLOSE_TRIES):
            try:
                return self._body_calls(text, a, b), b + len(w.close)
            except FormatError as e:  # the close token may sit inside a string value: try the next one
                error = error or e
            b = text.find(w.close, b + len(w.close))
            if b < 0:
                break
        raise error

    def parse_strict(self, text: str) -> list[ToolCall]:
        w = self.spelling
        start = reasoning_offset(text)
        i = text.find(w.open, start)
        if i < 0:
            if w.bare and text.startswith("[", skip_ws(text, start)):
                return strict_call_list(self, text[start:].strip(), skip_ws(text, start))
            raise self.error(f"missing {w.open}", start)
        calls: list[ToolCall] = []
        for _ in range(MAX_BLOCKS):
            got, end = self._block(text, i)
            calls.extend(got)
            i = text.find(w.open, end)
            if i < 0:
                return calls
        raise self.error(f"more than {MAX_BLOCKS} {w.open} blocks", i)

    # ---- recovery ----------------------------------------------------------------------------------------------

    def recover(self, text: str, out: Lenient) -> None:
        w = self.spelling
        body = text[reasoning_offset(text) :]
        chunks = body.split(w.open)[1:]
        if not chunks:
            # a misspelt or foreign opening token (or prose) before the calls is not read
            skip = after_opening_tag(body, w.open) if w.lines else list_start(body)
            if skip or not (w.bare and body.lstrip().startswith("[")):
                out.note("missing_tag", f"missing {w.open}" + (f" (read after {body[:skip].strip()[:40]!r})" if skip else ""))
            chunks = [body[skip:]]
        for n, chunk in enumerate(chunks[:MAX_RECOVERED_BLOCKS]):
            if budget_spent():
                out.note("gave_up", "stopped: the repair budget is spent")
                return
            j = chunk.find(w.close)
            if j >= 0:
                chunk = chunk[:j]
            elif not w.close_optional:
                out.note("missing_tag", f"missing {w.close}")
            self._recover_block(chunk.strip(), out, at_end=j < 0 and n == len(chunks) - 1)

    def _recover_block(self, src: str, out: Lenient, at_end: bool) -> None:
        """The calls of one block's body (``at_end``: the text ends inside it)."""
        if src.lstrip("[ \t\r\n").startswith("{"):  # JSON calls inside the sentinels (LFM2's JSON mode)
            if not self.spelling.json_ok:
                out.note("not_a_call", "JSON call objects where pythonic calls were expected")
            for item in as_items(lenient_json_in_prose(src)):
                add_call(out, item)
            return
        close = "" if at_end else "]"  # (a list the text stops in is left open, as written)
        if self.spelling.lines and src.startswith("[") and not at_end and not src.endswith("]"):
            src = src[1:].lstrip()  # a "[" that opens no list (the lines follow it): a stray opening token
            out.note("not_a_call", "a '[' before the calls' lines that no ']' closes")
        if self.spelling.lines and not src.startswith("["):
            src = "[" + ", ".join(self._line_calls(src, out)) + close
        elif not src.startswith("["):
            src = f"[{src}{close}"
        if src in ("[", "[]"):
            out.note("unreadable", "no call found")
            return
        recover_list(self, src, out, read_whole=True, at_end=at_end)

    def _line_calls(self, src: str, out: Lenient) -> list[str]:
        """The calls of a one-call-per-line body: each from a line that starts like one to its closing parenthesis
        (a comma may put another after it); other text is prose (reported). A call not closed within
        :data:`MAX_SPLIT_CHARS` characters in all runs to the end of its lines."""
        groups: list[list[str]] = []
        glued = _glued_call(offered_tools())
        for line in src.split("\n", MAX_LINES)[:MAX_LINES]:
            stripped = line.strip()  # (looks_pythonic's pattern is slow on long leading whitespace)
            head = stripped[:MAX_NAME_CHARS]
            if looks_pythonic(head) or (glued is not None and glued.match(head)):
                groups.append([stripped])
            elif groups:
                groups[-1].append(line)
            elif stripped:
                out.note("not_a_call", f"not a call: {stripped[:80]!r}")
        pieces = []
        budget = MAX_SPLIT_CHARS
        for group in groups:
            segment = "\n".join(group)
            pos = 0
            for _ in range(MAX_LINES):
                p = segment.find("(", pos)
                if p < 0 and pos:
                    break
                window = segment[p : p + budget] if p >= 0 else ""
                close = matching_paren(window, 0)
                budget -= min(close + 1, len(window))
                if close >= len(window) or window[close] != ")":  # no "(", not closed in budget, or by another bracket
                    pieces.append(segment[pos:].strip())
                    pos = len(segment)
                    break
                pieces.append(segment[pos : p + close + 1].strip())
                pos = skip_ws(segment, p + close + 1)
                if not segment.startswith(",", pos):
                    break
                pos = skip_ws(segment, pos + 1)
                if not looks_pythonic(segment[pos : pos + MAX_NAME_CHARS]):
                    break
            rest = segment[pos:].strip()
            if rest and rest != ",":
                out.note("not_a_call", f"text after a call: {rest[:80]!r}")
        return pieces

    # ---- writing -----------------------------------------------------------------------------------------------

    def render(self, calls: Sequence[ToolCall]) -> str:
        w = self.spelling
        rendered = [render_call(c.name, dict(c.arguments)) for c in calls]
        if w.lines:
            return w.open + "\n".join(rendered) + w.close
        return f"{w.open}[{', '.join(rendered)}]{w.close}"


MAX_GLUED_TOOLS = 256  # offered tool names matched at the start of a line that does not start like a call


def _glued_call(offered: Any) -> re.Pattern | None:
    """A pattern matching a line that starts with an offered tool's name glued to a parameter's (its ``(`` lost:
    ``math_gcdnum1=12, num2=18)``) or to ``)``; ``None`` without tools."""
    names = sorted((n for n in list(offered or ())[:MAX_GLUED_TOOLS] if isinstance(n, str) and n), key=len, reverse=True)
    return _glued_pattern(tuple(names)) if names else None


@functools.lru_cache(maxsize=64)
def _glued_pattern(names: tuple[str, ...]) -> re.Pattern:
    return re.compile("(?:" + "|".join(map(re.escape, names)) + r")(?:[^\W\d]\w*[ \t]*=|[ \t]*\))")
