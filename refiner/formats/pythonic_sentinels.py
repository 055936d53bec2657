"""Pythonic call lists inside a model's own sentinel tokens: one grammar, a :class:`Wrapper` per catalog row (a
``[...]`` list, or one call per line; ToolACE's ``<function_list>[f(a=1)]</function_list>``), and :class:`CallLines` (no
sentinel). Calls are read by :mod:`refiner.formats.pythonic`, a broken list by :func:`recover_list`. Text may come
before and after the sentinels; a closing token inside a string value is text (the next one is tried)."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from typing import Any

from refiner.calls import ToolCall
from refiner.formats import pythonic_scan
from refiner.formats.base import (
    Detection,
    FormatError,
    Lenient,
    Problem,
    WireFormat,
    markup_name,
    name_refused,
    offered_tools,
)
from refiner.formats.family import POLICY
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, budget_spent, charge, lenient_json, take_items
from refiner.formats.lenient import add_call, as_items, lenient_json_in_prose, lenient_region
from refiner.formats.message import AnswerParts, trim_turn_end
from refiner.formats.pythonic import (
    CONSTANTS,
    IDENTIFIER_NAME,
    MAX_AST_CHARS,
    Literals,
    dotted_name,
    fast_call_list,
    fast_call_prefix,
    lenient_string,
    looks_pythonic,
    parse_expr,
    parse_quietly,
    place_positional,
    render_call,
    strict_call_list,
)
from refiner.formats.pythonic_mend import VALUE_AFTER, mend_list
from refiner.formats.pythonic_scan import after_opening_tag, list_start, matching_paren, open_brackets, split_top_level
from refiner.formats.reasoning import is_markup
from refiner.formats.strict import strict_fields, strict_json
from refiner.formats.text import reasoning_offset, skip_ws

MAX_CLOSE_TRIES = 4  # closing tokens strict parsing tries for one block (one may sit inside a string value)
MAX_BLOCKS = 64  # blocks read per text
MAX_LINES = 512  # lines of a one-call-per-line block read by recovery
MAX_RECOVERED_BLOCKS = 16  # blocks recovery reads (each may cost an ast parse)
MAX_SPLIT_CHARS = 16_384  # characters of a one-call-per-line body matched for parentheses, in all
MAX_NAME_CHARS = 256  # characters of a line looked at for a call's start
MAX_RECOVERED_SEGMENTS = 128  # items of a broken list recovery reads at most
MAX_RECOVER_CHARS = 4096  # characters of a broken list read after its plain-layout prefix
AST_COST_PER_CHAR = 2  # repair-budget units per character handed to ast


@dataclass(frozen=True)
class Wrapper:
    open: str
    close: str  # "": no close token, the calls run to the text's end
    lines: bool = False  # calls one after another, ``between`` between them, instead of a [...] list
    between: str = "\n"  # written between two calls of a ``lines`` body; read with the blanks around it free
    close_optional: bool = field(default=False, metadata=POLICY)  # the end token may be missing at the text's end
    bare: bool = field(default=False, metadata=POLICY)  # a bare [...] list that is the whole answer is valid too
    json_ok: bool = field(default=False, metadata=POLICY)  # a JSON list of {"name", "arguments"} objects too (LFM2)
    shared: bool = field(default=False, metadata=POLICY)  # other rows (or prose) write the open token too: see sniff
    # untagged pythonic calls are this row's (claims_text); recovery reads one list, either tag may be missing
    untagged: bool = field(default=False, metadata=POLICY)


class SentinelPythonic(WireFormat):
    """The grammar (its rows, a :class:`Wrapper` each, are in :mod:`refiner.formats.catalog`)."""

    spelling: Wrapper
    name_pattern = IDENTIFIER_NAME
    pythonic = True

    @classmethod
    def tags_for(cls, w: Wrapper) -> tuple[str, ...]:
        return tuple(t for t in (w.open, w.close) if t)

    @classmethod
    def detection_for(cls, w: Wrapper, rank: int) -> Detection:
        # (an open token that is no markup, a word, is a row's marker only where its sniff claims the text)
        return Detection(rank=rank, markers=(w.open,), closers=(w.close,) if w.close else (),
                         bare=w.bare or not is_markup(w.open), strict_needs=() if w.bare else (w.open,),
                         claim_needs=("(",) if w.untagged else ())

    def claims_text(self, body: str) -> bool:
        return self.spelling.untagged and looks_pythonic(body)

    def sniff(self, body: str, at: int) -> bool:
        """A ``shared`` row claims a block only when a pythonic call (not a list, not JSON) starts it."""
        w = self.spelling
        if not w.shared or not body.startswith(w.open, at):
            return True
        k = skip_ws(body, at + len(w.open))
        return not body.startswith(("[", "{"), k) and looks_pythonic(body[k : k + MAX_NAME_CHARS])

    # ---- reading -----------------------------------------------------------------------------------------------

    def _body_calls(self, text: str, a: int, b: int) -> list[ToolCall]:
        body = text[a:b]
        src = body.strip()
        offset = a + len(body) - len(body.lstrip())
        if self.spelling.json_ok and src.startswith("[") and src[1:].lstrip().startswith("{"):
            return [ToolCall(*strict_fields(self, item, offset, what="call", index=i)[:2])
                    for i, item in enumerate(strict_json(self, src, offset))]
        if self.spelling.lines:  # (no call: "[]")
            fast = fast_call_list(src, self._between())
            if fast is not None:
                return fast
            src = "[" + ", ".join(filter(None, map(str.strip, split_calls(src, self._between())))) + "]"
        return strict_call_list(self, src, offset)

    def _block(self, text: str, i: int) -> tuple[list[ToolCall], int]:
        """The calls of the block whose open token is at ``i`` and the position after its close token."""
        w = self.spelling
        a = i + len(w.open)
        b = text.find(w.close, a) if w.close else -1
        if b < 0:
            if not w.close_optional:
                raise self.error(f"{w.open} without {w.close}", i)
            # a ``lines`` body ends with its line, the lines after it text (calls one a line run to the text's end)
            end = text.find("\n", a) if w.lines and w.between != "\n" else -1
            end = len(text) if end < 0 else end
            return self._body_calls(text, a, end), end
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
        if w.untagged:  # one list, either tag may be missing: a misspelt or foreign opening tag (or prose) is not read
            known = len(out.problems)
            src = lenient_region(text, w.open, w.close, out.problems).strip()
            missing = [p.message for p in out.problems[known:]]
            if f"missing {w.open}" in missing:
                src = src[list_start(src) :]
            # (with both tags there the strict parse already read this list whole and failed)
            recover_list(self, src, out, read_whole=bool(missing), at_end=f"missing {w.close}" in missing)
            return
        body = text[reasoning_offset(text) :]
        chunks = self._chunks(body)
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
            j = self._close_at(chunk, last=n == len(chunks) - 1)
            if j >= 0:
                chunk = chunk[:j]
            elif not w.close_optional:
                out.note("missing_tag", f"missing {w.close}")
            at_end = j < 0 and n == len(chunks) - 1
            if at_end and w.lines and w.close_optional:  # (lines that may end the text stop in a call left open)
                at_end = open_brackets(chunk) != (0, False)
            self._recover_block(chunk.strip(), out, at_end=at_end)

    def _chunks(self, body: str) -> list[str]:
        """The text after each open token up to the next one, the rest past :data:`MAX_RECOVERED_BLOCKS` of them as one
        more; an open token inside a string of a block not closed before it is that string's text."""
        w = self.spelling
        chunks: list[str] = []
        i = body.find(w.open)
        while i >= 0:
            a = i + len(w.open)
            i = body.find(w.open, a) if len(chunks) < MAX_RECOVERED_BLOCKS else -1
            for _ in range(MAX_CLOSE_TRIES):
                if i < 0 or w.close and body.find(w.close, a, i) >= 0 or not open_brackets(body[a:i])[1]:
                    break
                i = body.find(w.open, i + len(w.open))
            chunks.append(body[a : i if i >= 0 else len(body)])
        return chunks

    def _close_at(self, chunk: str, last: bool) -> int:
        """Where the block's close token is in ``chunk``, or -1: one inside a string is the string's text when a quote
        closes that string after it, or when the text (``last``: ``chunk`` ends it) ends right after it and an open
        token stands before it in the block (a quoted block); else the string's quote was lost before it."""
        w = self.spelling
        j = chunk.find(w.close) if w.close else -1
        for _ in range(MAX_CLOSE_TRIES):
            if j < 0 or not (pythonic_scan.CLOSING_QUOTE.search(chunk, j) or last and not chunk[j + len(w.close) :].strip()
                             and chunk.find(w.open, 0, j) >= 0) or not open_brackets(chunk[:j])[1]:
                return j
            j = chunk.find(w.close, j + len(w.close))
        return -1

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
        if not src.startswith("["):
            src = "[" + (", ".join(self._line_calls(src, out)) if self.spelling.lines else src) + close
        if src in ("[", "[]"):
            out.note("unreadable", "no call found")
            return
        recover_list(self, src, out, read_whole=True, at_end=at_end)

    def _between(self) -> str:
        """What separates two calls of a ``lines`` body (its blanks aside)."""
        return self.spelling.between.strip() or "\n"

    def _line_calls(self, src: str, out: Lenient) -> list[str]:
        """The calls of a ``lines`` body (a line ends at each ``between`` outside strings): each from a line that starts
        like one to its closing parenthesis (a comma, or a one-character ``between``, may put another after it); other
        text is prose (reported). A call not closed in :data:`MAX_SPLIT_CHARS` characters in all ends with its lines."""
        src = "\n".join(split_calls(src, self._between()))  # (a body of lines as it is)
        groups: list[list[str]] = []
        # a line starting with an offered name glued to a parameter or ")" (its "(" lost: "math_gcdnum1=12)") is a call
        names = [n for n in list(offered_tools() or ())[:MAX_GLUED_TOOLS] if isinstance(n, str) and n]
        alts = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
        glued = re.compile(f"(?:{alts})" + r"(?:[^\W\d]\w*[ \t]*=|[ \t]*\))") if names else None
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
        between = self.spelling.between.strip()
        seps = (",", between) if len(between) == 1 else (",",)
        for group in groups:
            segment = "\n".join(group)
            pos = 0
            for _ in range(MAX_LINES):
                p = segment.find("(", pos)
                window = segment[p : p + budget] if p >= 0 else ""
                close = matching_paren(window, 0)
                budget -= min(close + 1, len(window))
                if close >= len(window) or window[close] != ")":  # no "(", not closed in budget, or by another bracket
                    pieces.append(segment[pos:].strip())
                    pos = len(segment)
                    break
                pieces.append(segment[pos : p + close + 1].strip())
                pos = skip_ws(segment, p + close + 1)
                if not segment.startswith(seps, pos):
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
            return w.open + w.between.join(rendered) + w.close
        return f"{w.open}[{', '.join(rendered)}]{w.close}"


class CallLines(SentinelPythonic):
    """One call a line with no sentinel (vLLM's granite_pythonic): each line that starts a call is one call, the other
    lines are text. No literal tells these lines from another row's untagged calls or from prose, so detection never
    names the row (``Detection.by_name``): it is read when a request, the proxy's setting or a template names it."""

    @classmethod
    def detection_for(cls, w: Wrapper, rank: int) -> Detection:
        return Detection(rank=rank, by_name=True)

    def parse_strict(self, text: str) -> list[ToolCall]:
        start = reasoning_offset(text)
        calls = [c.rstrip(" \t\r") for c in _CALL_LINE.findall(text[start:])]
        if not calls:
            raise self.error("no call line", start)
        return strict_call_list(self, "[" + ", ".join(calls) + "]", start)

    def recover(self, text: str, out: Lenient) -> None:
        src = text[reasoning_offset(text) :].strip()
        depth, in_string = open_brackets(src[src.rfind("\n") + 1 :])
        self._recover_block(src, out, at_end=depth > 0 or in_string)  # (the text stops in a last line left open)

    def answer_parts(self, text: str) -> AnswerParts:
        """The content is the text before the first call line and after the last one, and the lines between them that
        start no call; the calls' span runs from the first call line to the last."""
        lines = list(_CALL_LINE.finditer(text))
        if not lines:
            return AnswerParts(trim_turn_end(text), None, (len(text), len(text)))
        between = (text[m.end() + 1 : n.start()] for m, n in pairwise(lines))  # (each call line and its break)
        content = text[: lines[0].start()] + "".join(between) + text[lines[-1].end() :]
        return AnswerParts(trim_turn_end(content), None, (lines[0].start(), lines[-1].end()))


def split_calls(src: str, sep: str) -> list[str]:
    """``src`` split at each ``sep`` outside quoted strings. A string ends with its line; a quote that no string
    closes on its line is text, and so is every later quote of its kind on that line (its string would end where the
    first one's failed). So a line break, or a text with no quote, is split at every ``sep``."""
    if sep == "\n" or ('"' not in src and "'" not in src) or sep not in src:
        return src.split(sep)
    pieces, start, pos, dead = [], 0, 0, ""  # dead: the quotes that open no string up to the line's end
    while (pos := _plain_run(sep, dead).match(src, pos).end()) < len(src):
        if src.startswith(sep, pos):
            pieces.append(src[start:pos])
            start = pos = pos + len(sep)
            dead = "" if "\n" in sep else dead
        else:  # a line break ending the dead quotes' line, or a quote that closes no string on its line
            dead = "" if src[pos] == "\n" else dead + src[pos]
            pos += 1
    pieces.append(src[start:])
    return pieces


@lru_cache(maxsize=32)
def _plain_run(sep: str, dead: str) -> re.Pattern[str]:
    """Text and closed strings up to ``sep``, a quote not in ``dead`` that closes no string on its line, or (with
    ``dead`` quotes, which are text) the line's end."""
    live = [q for q in "'\"" if q not in dead]
    stops = re.escape(sep[0]) + "".join(live) + ("\\n" if dead else "")
    alts = [rf"[^{stops}]+", *(rf"(?:{q}{q})+|{q}[^{q}\\\n]*(?:\\.[^{q}\\\n]*)*{q}" for q in live)]
    if len(sep) > 1:
        alts.append(re.escape(sep[0]) + f"(?!{re.escape(sep[1:])})")
    return re.compile(f"(?:{'|'.join(alts)})*")


# a line that starts a call, the blanks before it left out (vLLM granite_pythonic's _CALL_RE, a dotted name too);
# its readers strip the blanks after it (a lazy group before them would try every split of a blank run)
_CALL_LINE = re.compile(r"^[ \t]*([A-Za-z_][\w.]*\(.*)$", re.MULTILINE)
MAX_GLUED_TOOLS = 256  # offered tool names matched at the start of a line that does not start like a call
_DROPPED: Any = object()  # an argument read as no value (dropped, with a problem)
_ARG_NAME = re.compile(r"[^\W\d]\w*")
_LEADING_ZEROS = re.compile(r"[+-]?0[0-9_]*[0-9]")  # Python refuses 07; the model meant 7 (a month, a day)
_PARTIAL_NAME = re.compile(r"\s*[^\W\d][\w.]*\s*")  # what a call list cut inside its next name ends with


def recover_list(fmt: WireFormat, src: str, out: Lenient, *, read_whole: bool, at_end: bool) -> None:
    """Adds the calls of the pythonic list ``src`` (tags removed) to ``out``: the plain-layout prefix by the fast
    reader; then the whole list by :mod:`ast` when ``read_whole`` (no strict parse read it); else, or when that
    fails, the list mended (:func:`~refiner.formats.pythonic_mend.mend_list`) or the rest item by item, quotes read
    leniently. ``at_end``: the text ends inside the list."""
    prefix, end, complete, _ = fast_call_prefix(src, limit=MAX_RECOVERED_ITEMS)
    k = take_items(len(prefix))
    gave_up = k < len(prefix) or (len(prefix) >= MAX_RECOVERED_ITEMS and not complete)
    if gave_up or complete:
        out.calls.extend(ToolCall(name, args) for name, args in prefix[:k])
        if gave_up:
            out.note("gave_up", f"stopped after {len(out.calls)} calls; the rest was not read")
        return
    if read_whole and (len(src) > MAX_AST_CHARS or charge(AST_COST_PER_CHAR * len(src))):
        try:
            out.calls.extend(strict_call_list(fmt, src, 0))
            return
        except FormatError as e:
            out.note("strict", str(e))
    if not at_end:
        mended = mend_list(src, end, prefix, offered_tools())
        if mended is not None:  # one character lost or doubled: the list read with it mended
            out.calls.extend(ToolCall(name, args) for name, args in mended[0])
            out.note("mended", f"broken call list read whole: {mended[1]}")
            return
    out.calls.extend(ToolCall(name, args) for name, args in prefix)
    if end:
        src = src[end:].lstrip().removeprefix(",")
    src = src.removeprefix("[")
    if len(src) > MAX_RECOVER_CHARS:
        out.note("gave_up", f"only the first {MAX_RECOVER_CHARS} characters of the broken list were read")
        src, at_end = src[:MAX_RECOVER_CHARS], False
    elif src.endswith("]") and matching_paren("[" + src, 0, lenient_quotes=True) == len(src):
        src, at_end = src[:-1], False  # the list's own "]": the text does not stop inside it
    segments = split_top_level(src)
    for n, segment in enumerate(segments):
        if n >= MAX_RECOVERED_SEGMENTS or budget_spent():
            out.note("gave_up", f"gave up after {n} of the list's items")
            return
        if segment.strip():
            _recover_call(fmt, segment.strip(), out, last=at_end and n == len(segments) - 1)


def _recover_call(fmt: WireFormat, segment: str, out: Lenient, last: bool) -> None:
    """Adds the call ``segment`` holds; ``last``: the text ends inside this segment, so an unclosed call is cut."""
    p = segment.find("(")
    name = " ".join(segment[:p].split()) if p > 0 else ""
    if p <= 0 or re.search(r"\w", name[: max(name.rfind("["), 0)]):  # (prose quoting a call inline: "I said [f(x=1)]")
        out.note("not_a_call", f"not a call: {segment[:80]!r}")
        if p <= 0 and last and out.calls and _PARTIAL_NAME.fullmatch(segment):  # "[f(a=1), get_we": cut in a name
            out.mark_cut(None)
        return
    if markup_name(name):  # markup read as a name: no call
        out.note("markup_name", name_refused(name))
        return
    try:  # whether it reads as a (dotted) identifier
        dotted = len(name) <= MAX_AST_CHARS and dotted_name(parse_quietly(name)) is not None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        dotted = False
    if not dotted:
        out.note("bad_name", f"tool name {name!r} is not an identifier")
    close = matching_paren(segment, p, lenient_quotes=True)
    unclosed = close == len(segment)
    if unclosed:
        out.note("unclosed", f"unclosed '(' in {name!r}")
    inner = segment[p + 1 : close]
    params = (offered_tools() or {}).get(name)  # the offered tool's parameters, name -> spec in declared order
    params = params if params is None or isinstance(params, Mapping) else dict.fromkeys(params)
    args = _recover_args(fmt, inner, out.problems, params)
    out.calls.append(ToolCall(name, args))
    if last and unclosed:
        complete, clean = _cut_arguments(inner, args)
        out.mark_cut(len(out.calls) - 1, name, complete, clean)

def _recover_args(fmt: WireFormat, inner: str, problems: list[Problem],
                  params: Mapping[str, Any] | None = None) -> dict:
    """The arguments in ``inner`` (a call's parentheses); ``params``: the tool's parameters, for positional values."""
    src = f"f({inner})"
    if len(src) <= MAX_AST_CHARS and charge(AST_COST_PER_CHAR * len(src)):
        try:
            node = parse_expr(fmt, src, 0)
            if isinstance(node, ast.Call):
                return Literals(fmt, src, 0, strict=False).arguments(node, problems, params)
        except FormatError:
            pass
    args = {}
    positional: list[Any] = []
    for part in map(str.strip, split_top_level(inner)):
        key, eq, raw = part.partition("=")
        key = key.strip()
        if not eq or not _ARG_NAME.fullmatch(key):
            if part and not positional and not args and _ARG_NAME.fullmatch(part) is None:
                value = _recover_value(fmt, "", part, problems, None)
                if value is not _DROPPED:
                    positional.append(value)
                    continue
            if part:
                problems.append(Problem("bad_argument", f"argument without a name dropped: {part[:80]!r}"))
            continue
        value = _recover_value(fmt, key, raw.strip(), problems, params.get(key) if params else None)
        if value is not _DROPPED:
            args[key] = value
    if positional:
        place_positional(positional, args, params, problems)
    return args

def _recover_value(fmt: WireFormat, key: str, raw: str, problems: list[Problem], param: Any = None) -> object:
    """One argument's value: a Python literal; else a string whose quotes were not escaped; else repaired JSON; else
    the text; :data:`_DROPPED` for no value or a number no JSON number holds; ``07`` as 7, or as text when ``param``
    declares a string. All but a literal reported."""
    if not raw:
        problems.append(Problem("bad_argument", f"argument {key!r} has no value; dropped"))
        return _DROPPED
    if len(raw) <= MAX_AST_CHARS and charge(AST_COST_PER_CHAR * len(raw)):
        try:
            node = parse_expr(fmt, raw, 0)
        except FormatError:
            node = None
        if node is not None:
            try:
                return Literals(fmt, raw, 0, strict=False, problems=problems).value(node)
            except FormatError as e:
                problems.append(Problem("bad_argument", f"argument {key!r} dropped: {e.message}"))
                return _DROPPED
    if _LEADING_ZEROS.fullmatch(raw):  # a string when its parameter declares one
        value = raw if getattr(param, "type", None) == "string" else int(raw)
        problems.append(Problem("bad_argument", f"value {raw!r} of {key!r} written with leading zeros; read as {value!r}"))
        return value
    text = lenient_string(raw) if len(raw) <= MAX_AST_CHARS else None
    if text is not None:
        value, unescaped = text
        if unescaped:
            problems.append(Problem("bad_argument", f"value of {key!r} holds a {raw[0]} that was not escaped; read "
                                                    f"to the quote that ends the value: {value[:60]!r}"))
        return value
    value = lenient_json(raw)
    if value is None:
        problems.append(Problem("bad_argument", f"value {raw[:80]!r} kept as text"))
        return raw.strip("\"'")
    return value


def _cut_arguments(inner: str, args: dict) -> tuple[dict, bool]:
    """For a call the text stops inside (``inner``: its arguments as written): ``(the arguments written whole, whether
    the text stops right after a value that cannot go on)`` (:class:`~refiner.formats.base.Cut`)."""
    tail = split_top_level(inner)[-1].strip()
    if not tail:  # stops after "(" or after a comma: every argument read was written whole
        return dict(args), False
    key, eq, raw = tail.partition("=")
    raw = raw.strip()
    complete = {k: v for k, v in args.items() if k != key.strip()}  # (the argument the text stops in left out)
    if not eq or not raw:  # stops in a name, or after "="
        return complete, False
    depth, in_string = open_brackets(raw)
    if in_string or depth:  # stops inside a string, or inside a list or dict (partly written)
        return complete, not in_string and raw[-1] not in VALUE_AFTER
    if raw in CONSTANTS or raw[0] in "[{(" or lenient_string(raw) is not None:
        return dict(args), True
    return complete, False  # a number (12 may be the start of 123), or half a name
