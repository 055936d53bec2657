"""DeepSeek tool calls, between sentinel tokens written with full-width bars and ``▁`` (U+2581) for spaces:
``<｜tool▁calls▁begin｜>`` ... ``<｜tool▁calls▁end｜>``, one ``<｜tool▁call▁begin｜>`` ... ``<｜tool▁call▁end｜>`` per call.
Two dialects, rows of the named-JSON grammar (:mod:`refiner.formats.named_json`) whose spellings (:data:`V3`,
:data:`V31`) are what the chat templates write and what render writes, read by this module's readers:

- ``deepseek_v3`` (DeepSeek-V3, R1, R1-0528): ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```
  <｜tool▁call▁end｜>``, calls separated by a newline (the chat template; vLLM's ``deepseekv3_tool_parser.py``, SGLang's
  ``deepseekv3_detector.py``);
- ``deepseek_v31`` (DeepSeek-V3.1, V3.2-Exp): ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>``, calls
  written back to back (vLLM's ``deepseekv31_tool_parser.py``, SGLang's ``deepseekv31_detector.py``).

The arguments are one JSON object, decoded before the closing token is looked for (so a string may hold it).
Prose (the template's ``content``) may come before ``<｜tool▁calls▁begin｜>``, R1's ``<think>...</think>`` before
that, and ``<｜end▁of▁sentence｜>`` or anything else after ``<｜tool▁calls▁end｜>``; whitespace between the tokens is
free. Recovery reads either dialect in either format: the ``function<｜tool▁sep｜>`` prefix and the code fence tell
them apart, and detection uses the same signs.
"""

from __future__ import annotations

import re

from refiner.calls import ToolCall
from refiner.formats.bare import bare_calls
from refiner.formats.base import ROW_CHARS, SPACED_NAME_PATTERN, Detection, Lenient
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, take_items
from refiner.formats.lenient import TokenFinder, add_arguments_call, past_strings
from refiner.formats.named_json import NamedJson, NamedSpelling
from refiner.formats.strict import decode_at, token_sections
from refiner.formats.tags import respell_tokens
from refiner.formats.text import reasoning_offset, skip_ws
from refiner.formats.xmlvalues import Finder

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
TYPE = "function"
FENCE_OPEN, FENCE_CLOSE = "```json", "```"


_NAME = re.compile(SPACED_NAME_PATTERN)
# Another format's token left where a call token was lost (<tool_call>, [TOOL_CALLS], <|python_tag|>): not part of
# the name after it.
_FOREIGN_TOKEN = re.compile(r"\s*(?:<[^<>\n]{1,40}>|\[[^\[\]\n]{1,40}\])\s*")
# V3 with every token lost: "functionNAME", the fenced JSON on the next lines.
_V3_BARE = re.compile(r"[ \t]*function[ \t]*([^\s<>{}\"'`]+)[ \t]*\n[ \t]*```(?:json)?[ \t]*\n")
MAX_BARE_CALLS = 256


def _bare_head(head: str) -> str:
    """A call's head with a foreign token before it dropped."""
    head = head.strip()
    m = _FOREIGN_TOKEN.match(head)
    return head[m.end() :].strip() if m is not None and m.end() < len(head) else head


def _bare_fenced(text: str, start: int, out: Lenient) -> bool:
    """V3 calls with every token lost, ``functionNAME\\n```json\\n{...}\\n```` one after another (each name line
    at the start of a line, the first at ``start`` or on one of the next lines); whether one was read."""
    m = _V3_BARE.match(text, skip_ws(text, start)) or _V3_BARE.search(text, start, start + ROW_CHARS)
    if m is None or (m.start() > start and text[m.start() - 1] != "\n"):
        return False
    read = 0
    while m is not None and read < MAX_BARE_CALLS and take_items(1):
        close = text.find("\n" + FENCE_CLOSE, m.end())
        stop = close if close >= 0 else len(text)
        add_arguments_call(out, m.group(1), text[m.end() : stop], at_end=close < 0)
        read += 1
        if close < 0:
            break
        m = _V3_BARE.match(text, skip_ws(text, close + 1 + len(FENCE_CLOSE)))
    return read > 0


def _is_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def looks_v3(body: str, at: int) -> bool:
    """Whether the first call after ``at`` is written the V3 way (``function<｜tool▁sep｜>`` or a code fence)."""
    seg = body[at : at + ROW_CHARS]
    c = seg.find(CALL_BEGIN)
    if c < 0:
        return FENCE_CLOSE in seg
    after = seg[c + len(CALL_BEGIN) :].lstrip()
    return after.startswith(TYPE + SEP) or FENCE_CLOSE in after.split(CALL_END, 1)[0]


# What the templates write: V3's fenced layout, V3.1's plain one.
V3 = NamedSpelling(CALLS_BEGIN, CALLS_END, CALL_BEGIN + TYPE + SEP, f"\n{FENCE_OPEN}\n", f"\n{FENCE_CLOSE}{CALL_END}",
                   joiner="\n")
V31 = NamedSpelling(CALLS_BEGIN, CALLS_END, CALL_BEGIN, SEP, CALL_END)


class DeepSeek(NamedJson):
    """The named-JSON grammar with DeepSeek's readers: whitespace free between the tokens, names with spaces, and
    recovery of either layout; its two rows (V3, V3.1) are in the catalog (:mod:`refiner.formats.catalog`)."""

    tags = (CALLS_BEGIN, CALL_BEGIN, SEP, CALL_END, CALLS_END)
    name_pattern = SPACED_NAME_PATTERN

    @classmethod
    def tags_for(cls, sp: NamedSpelling) -> tuple[str, ...]:
        return cls.tags

    @classmethod
    def detection_for(cls, sp: NamedSpelling, rank: int) -> Detection:
        return Detection(rank=rank, markers=(CALLS_BEGIN, CALL_BEGIN), closers=(CALL_END, CALLS_END, SEP))

    @property
    def fenced(self) -> bool:
        return FENCE_OPEN in self.spelling.name_close

    def sniff(self, body: str, at: int) -> bool:
        """V3's layout (``function`` + SEP, a code fence) tells its calls from V3.1's."""
        return looks_v3(body, at) if self.fenced else True

    # Strict

    def parse_strict(self, text: str) -> list[ToolCall]:
        return token_sections(self, text, CALLS_BEGIN, CALL_BEGIN, CALLS_END, self._call)

    def _call(self, text: str, pos: int) -> tuple[ToolCall, int]:
        if self.fenced:
            if not text.startswith(TYPE + SEP, pos):
                raise self.error(f"expected {TYPE}{SEP}NAME after {CALL_BEGIN}", pos)
            pos += len(TYPE + SEP)
            j = text.find("\n", pos)
            if j < 0:
                raise self.error("missing the newline after the tool name", pos)
            name = text[pos:j]
            if not _is_name(name):
                raise self.error(f"tool name {name[:60]!r} is not allowed", pos)
            pos = skip_ws(text, j)
            if not text.startswith(FENCE_OPEN, pos):
                raise self.error(f"expected {FENCE_OPEN} before the arguments of {name!r}", pos)
            pos += len(FENCE_OPEN)
        else:
            j = text.find(SEP, pos)
            if j < 0:
                raise self.error(f"missing {SEP} after the tool name", pos)
            name = text[pos:j]
            if not _is_name(name):
                raise self.error(f"tool name {name[:60]!r} is not allowed", pos)
            pos = j + len(SEP)
        at = skip_ws(text, pos)
        args, pos = decode_at(self, text, pos)
        if type(args) is not dict:
            raise self.error(f"the arguments of {name!r} must be a JSON object, got {type(args).__name__}", at)
        pos = skip_ws(text, pos)
        if self.fenced:
            if not text.startswith(FENCE_CLOSE, pos):
                raise self.error(f"expected {FENCE_CLOSE} after the arguments of {name!r}", pos)
            pos = skip_ws(text, pos + len(FENCE_CLOSE))
        if not text.startswith(CALL_END, pos):
            raise self.error(f"expected {CALL_END} after the arguments of {name!r}, got {text[pos : pos + 30]!r}", pos)
        return ToolCall.trusted(name, args), pos + len(CALL_END)

    # Lenient (either dialect)

    def recover(self, text: str, out: Lenient) -> None:
        text = respell_tokens(text, self.tags, out)
        start = reasoning_offset(text)
        f = Finder(text)
        strings = TokenFinder(text, (CALL_END, CALL_BEGIN, CALLS_END))
        first = f.next(CALL_BEGIN, start)
        b = f.next(CALLS_BEGIN, start)
        if b < 0 or (0 <= first < b):
            out.note("missing_tag", f"missing {CALLS_BEGIN}")
        pos = start
        for n in range(MAX_RECOVERED_ITEMS + 1):
            c = f.next(CALL_BEGIN, pos)
            # calls whose <｜tool▁call▁begin｜> was lost: a separator before the next call token
            s = f.next(SEP, pos)
            while 0 <= s < (c if c >= 0 else len(text)):
                if not take_items(1):
                    return
                out.note("missing_tag", f"missing {CALL_BEGIN}")
                pos = self._recover_call(text, self._call_start(text, pos, s), f, out, strings)
                s = f.next(SEP, pos)
            if c < 0:
                if n == 0 and not out.calls:
                    self._recover_bare(text, start, out)
                break
            if not take_items(1):  # (the parse's count of items read: a gave_up problem)
                return
            pos = self._recover_call(text, c + len(CALL_BEGIN), f, out, strings)
        if f.next(CALLS_END, start) < 0:
            out.note("missing_tag", f"missing {CALLS_END}")

    @staticmethod
    def _call_start(text: str, lo: int, sep: int) -> int:
        """Where a call whose separator is at ``sep`` starts when its call token was lost: after the token or line
        break before it (not before ``lo``)."""
        starts = [lo, text.rfind("\n", lo, sep) + 1]
        for token in (CALLS_BEGIN, CALL_END, CALLS_END):
            i = text.rfind(token, lo, sep)
            if i >= 0:
                starts.append(i + len(token))
        return max(starts)

    def _recover_bare(self, text: str, start: int, out: Lenient) -> None:
        """No call token or separator at all: the calls' own shape, when it is unambiguous: V3's
        ``functionNAME`` line and fenced JSON, or V3.1's ``NAME{...}``."""
        if not (_bare_fenced(text, start, out) or bare_calls(text, start, out)):
            out.note("missing_tag", f"no {CALL_BEGIN} or {SEP} found")

    def _recover_call(self, text: str, pos: int, f: Finder, out: Lenient, strings: TokenFinder) -> int:
        end, tag = past_strings(strings, pos, *f.first((CALL_END, CALL_BEGIN, CALLS_END), pos))
        seg = text[pos:end]
        if tag is None:
            out.note("unclosed", f"a call cut short: {seg[:60]!r}")
        elif tag != CALL_END:
            out.note("missing_tag", f"missing {CALL_END} after {seg[:60]!r}")
        after = end + len(CALL_END) if tag == CALL_END else end
        head, sep, rest = seg.partition(SEP)
        cut = tag is None
        if cut and (not sep or (_bare_head(head) == TYPE and "\n" not in rest)):
            out.note("unclosed", f"the text ends inside a tool name: {seg[:60]!r}")
            out.mark_cut(None)
            return after
        if not sep:
            out.note("missing_tag", f"missing {SEP} in {seg[:60]!r}")
            line, nl, lines = seg.strip().partition("\n")
            if nl and lines.lstrip().startswith(FENCE_CLOSE):  # V3: the name line (its type word glued on)
                head, rest = line, lines
                if head.startswith(TYPE) and _is_name(head[len(TYPE) :].strip()):
                    head = head[len(TYPE) :]
            else:
                brace = seg.find("{")
                head, rest = (seg, "") if brace < 0 else (seg[:brace], seg[brace:])
        head = _bare_head(head)
        if head == TYPE:  # the V3 layout: the name is the first line after the separator
            name, _, rest = rest.partition("\n")
        else:
            name = head
        name = name.strip()
        body = rest.strip()
        if body.startswith(FENCE_OPEN):
            body = body[len(FENCE_OPEN) :]
        elif body.startswith(FENCE_CLOSE):
            body = body[len(FENCE_CLOSE) :]
        body = body.strip()
        if body.endswith(FENCE_CLOSE):
            body = body[: -len(FENCE_CLOSE)].rstrip()
        if not name:
            out.note("no_name", f"a call without a tool name: {seg[:60]!r}")
            if cut:
                out.mark_cut(None)
            return after
        if not _is_name(name):
            out.note("bad_name", f"tool name {name[:60]!r} is not allowed")
        add_arguments_call(out, name, body, at_end=cut)
        return after
