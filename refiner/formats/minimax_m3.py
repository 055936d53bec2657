"""MiniMax-M3 tool calls: XML elements each preceded by the namespace token ``]<]minimax[>[``, one element per argument
named by the argument itself, objects as nested elements and lists as ``<item>`` elements::

    ]<]minimax[>[<tool_call>
    ]<]minimax[>[<invoke name="search_docs">]<]minimax[>[<query>rate limits]<]minimax[>[</query>]<]minimax[>[<tags>]<]minimax[>[<item>api]<]minimax[>[</item>]<]minimax[>[</tags>]<]minimax[>[</invoke>
    ]<]minimax[>[</tool_call>

Parallel calls are ``<invoke>`` elements of one ``<tool_call>`` (several blocks are read too); whitespace between
elements is free; null values are left out; reasoning is ``<mm:think>...</mm:think>``. A scalar is its element's raw
text, typed by :func:`refiner.formats.xmlvalues.read_value`, then (nested values too) by the tool specs. Elements
nesting deeper than :data:`~refiner.formats.base.MAX_ARGUMENT_DEPTH` are invalid (strict) or dropped (lenient)."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import MAX_ARGUMENT_DEPTH, MAX_NOTES, Detection, Lenient, WireFormat, name_refused
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, take_items
from refiner.formats.strict import json_head
from refiner.formats.tags import MAX_SCANNED, letters, osa_distance
from refiner.formats.text import reasoning_offset, skip_ws
from refiner.formats.xml_lenient import slip
from refiner.formats.xml_spelling import _attrs
from refiner.formats.xmlvalues import read_value, retype_calls, retype_value, write_key, write_value

NAME_PATTERN = r"[^\s\"<>]+"


@dataclass(frozen=True)
class NsXmlSpelling:
    """The literals; ``ns``: the namespace token written before every tag, ``item``: the element holding a list item."""

    ns: str = "]<]minimax[>["
    section: str = "tool_call"
    invoke: str = "invoke"
    name_attr: str = "name"
    item: str = "item"

    section_open = property(lambda s: f"{s.ns}<{s.section}>")
    section_close = property(lambda s: f"{s.ns}</{s.section}>")
    invoke_open = property(lambda s: f"{s.ns}<{s.invoke}")  # then ` name="..."` and `>`
    invoke_close = property(lambda s: f"{s.ns}</{s.invoke}>")


@dataclass
class _Tag:
    """A tag after a namespace token: from the token to after its ``>``, its raw text between ``<``/``</`` and
    ``>``, and the key it names (a quoted key decoded)."""

    start: int
    end: int
    closing: bool
    raw: str
    key: str


class _Tags(list):
    """Tags in order, ``rest`` read as far as asked (:meth:`more`): a strict reading failing early reads no further."""

    def __init__(self, rest: Iterator[_Tag]) -> None:
        super().__init__()
        self._rest = rest

    def more(self, i: int) -> bool:
        """Whether there is an ``i``-th tag, reading on (at least as many again as are read) up to it."""
        self.extend(itertools.islice(self._rest, max(i + 1, 2 * len(self), 16) - len(self)))
        return i < len(self)


@dataclass
class _Frame:
    raw: str
    key: str
    children: list[tuple[str, bool, Any]]  # (key, written as an <item>, value)
    text: str | None = None  # a leaf's raw text


class NsXml(WireFormat):
    """The grammar; each row's :class:`NsXmlSpelling` is ``self.spelling`` (its rows: the catalog)."""

    spelling: NsXmlSpelling
    name_pattern = NAME_PATTERN

    @classmethod
    def tags_for(cls, s: NsXmlSpelling) -> tuple[str, ...]:
        return (s.section_open, s.invoke_open, s.invoke_close, s.section_close)

    @classmethod
    def detection_for(cls, s: NsXmlSpelling, rank: int) -> Detection:
        return Detection(rank=rank, markers=(s.section_open, s.invoke_open), closers=(s.invoke_close, s.section_close))

    # Tags

    def _tag_at(self, text: str, p: int, nxt: int, *, lenient: bool) -> _Tag | None:
        """The tag whose namespace token is at ``p`` (``nxt``: the next token's position, or the text's end), or
        ``None``; whitespace after the token only when ``lenient``."""
        s = self.spelling
        q = skip_ws(text, p + len(s.ns)) if lenient else p + len(s.ns)
        if not text.startswith("<", q):
            return None
        closing = text.startswith("</", q)
        q += 2 if closing else 1
        if text.startswith('"', q):  # a key written as its JSON string literal
            if text.find('"', q + 1, nxt) < 0:
                return None
            # (within this tag's region: each part of the text is decoded once)
            if (head := json_head(text[q:nxt])) is None:
                return None
            key, e = head[0], head[1] + q
            if type(key) is not str or not text.startswith(">", e):
                return None
            return _Tag(p, e + 1, closing, text[q:e], key)
        gt = text.find(">", q, nxt)
        if gt < 0:
            return None
        raw = text[q:gt]
        return _Tag(p, gt + 1, closing, raw, raw.strip() if lenient else raw)

    def _invoke_name(self, tag: _Tag, loose: bool = False) -> str | None:
        """The name of the call ``tag`` opens (``loose``: any quotes, its ``=`` lost too), else ``None``."""
        s = self.spelling
        raw = tag.raw
        if tag.closing or not raw.startswith(s.invoke) or not raw[len(s.invoke) : len(s.invoke) + 1].isspace():
            return None
        rest = raw[len(s.invoke) :].strip()
        if loose:
            return _attrs(rest, loose=True).get(s.name_attr, "")
        head = f'{s.name_attr}="'
        return rest[len(head) : -1] if rest.startswith(head) and rest.endswith('"') else ""

    def parse_strict(self, text: str) -> list[ToolCall]:
        s = self.spelling
        tags = _Tags(self._each_tag(text, reasoning_offset(text), False))  # (read as far as asked)

        def opening(k: int) -> int | None:  # the first block's opening tag from tags[k] on
            while k < len(tags) or tags.more(k):
                if tags[k].raw == s.section and not tags[k].closing:
                    return k
                k += 1
            return None

        i = opening(0)
        if i is None:
            raise self.error(f"no {s.section_open}", reasoning_offset(text))
        calls: list[ToolCall] = []
        while i is not None:  # each block: calls, whitespace between, then the block's end
            end, i = tags[i].end, i + 1
            while True:
                nxt = tags[i].start if i < len(tags) or tags.more(i) else len(text)
                if nxt == len(text) and not text[end:].strip():
                    raise self.error(f"missing {s.section_close}", len(text))
                if not text[end:nxt].strip() and tags[i].closing and tags[i].raw == s.section:
                    break
                if text[end:nxt].strip() or tags[i].closing or not tags[i].raw.startswith(s.invoke):
                    got = text[end:nxt].strip() or text[nxt : nxt + 30]
                    raise self.error(f"expected {s.invoke_open} or {s.section_close}, got {got[:30]!r}", nxt)
                i = self._recover_invoke(text, tags, i, calls, None)
                end = tags[i - 1].end
            i = opening(i + 1)
        return calls

    def render(self, calls: Sequence[ToolCall]) -> str:
        s = self.spelling
        parts = [s.section_open, "\n"]
        for c in calls:
            parts.append(f'{s.invoke_open} {s.name_attr}="{c.name}">')
            parts.extend(self._element(k, v, in_object=False) for k, v in c.arguments.items())
            parts.append(s.invoke_close + "\n")
        parts.append(s.section_close)
        return "".join(parts)

    def _element(self, key: str, value: Any, *, in_object: bool) -> str:
        s = self.spelling
        plain = (key != "" and key == key.strip() and not any(c in key for c in '<>"\n\r\t') and s.ns not in key
                 and not key.startswith(("/", s.invoke, s.section)) and not (in_object and key == s.item))
        raw = write_key(key, plain)
        return f"{s.ns}<{raw}>{self._body(value)}{s.ns}</{raw}>"

    def _body(self, value: Any) -> str:
        s = self.spelling
        if isinstance(value, dict) and value:
            return "".join(self._element(k, v, in_object=True) for k, v in value.items())
        if isinstance(value, list) and value:
            return "".join(f"{s.ns}<{s.item}>{self._body(v)}{s.ns}</{s.item}>" for v in value)
        return write_value(value, (s.ns,))

    def recover(self, text: str, out: Lenient) -> None:
        s = self.spelling
        pos = reasoning_offset(text)
        text = self._respelt(text, pos, out)
        tags = _Tags(itertools.islice(self._each_tag(text, pos, True), 4 * MAX_RECOVERED_ITEMS))
        tags.more(4 * MAX_RECOVERED_ITEMS)  # (all at once)
        if not any(self._invoke_name(t) is not None for t in tags):
            out.note("missing_tag", f"no {s.invoke_open} ...> call found")
            if any(t.raw.strip() == s.section and not t.closing for t in tags):
                out.note("unreadable", f"a {s.section_open} block holding no call")
            return
        section_seen = False
        i = 0
        for _ in range(MAX_RECOVERED_ITEMS):
            while i < len(tags) and self._invoke_name(tags[i]) is None:
                section_seen = section_seen or (not tags[i].closing and tags[i].key == s.section)
                i += 1
            if i >= len(tags):
                break
            if not section_seen:
                out.note("missing_tag", f"missing {s.section_open} before a call")
                section_seen = True
            if not take_items(1):
                return
            start = i
            i = self._recover_invoke(text, tags, i, out.calls, out)
            if i < 0:
                return
        if not any(t.closing and t.key == s.section for t in tags[start:]):
            out.note("missing_tag", f"missing {s.section_close} after the last call")

    def _respelt(self, text: str, pos: int, out: Lenient) -> str:
        """``text`` with a call's lost token and tag put back before its name at a line's start, and each look-alike of
        the namespace token (before a ``<``) written as it: the token's word in any case, the whole at most one edit
        (:func:`~refiner.formats.tags.osa_distance`) from the token; the block's or a call's tag word written
        otherwise after such a token (``<INVOKE``, ``<toolcall>``) as that word."""
        s = self.spelling
        pre, word, near, lost = _look_alikes(s)
        if text.count(s.name_attr, pos) > text.count(s.invoke_open, pos) and lost.search(text, pos):
            text = text[:pos] + lost.sub(lambda m: f"{s.invoke_open} {m[2]}", text[pos:])
            out.note("missing_tag", f"a call's {s.name_attr} without {s.invoke_open} before it")
        if text[pos:].lower().count(word) == text.count(s.ns, pos):  # (every token written as it is)
            return text
        parts, at = [], pos
        for m in itertools.islice(near.finditer(text, pos), MAX_SCANNED):
            if text.startswith(s.ns, m.start(2) - pre):
                continue
            # (the marks before the word may start with what ends the text before the token: the nearest reading)
            d, k = min((osa_distance(m[0][k:].lower(), s.ns.lower()), k) for k in range(len(m[1]) + 1))
            if d > 1 or m.start() + k < at:
                continue
            tag = _TAG_WORD.match(text, skip_ws(text, m.end()))
            own = next((w for w in (s.section, s.invoke) if tag and tag[1] != w and letters(tag[1]) == letters(w)), "")
            parts += (text[at : m.start() + k], s.ns, text[m.end() : tag.start(1)] + own if own else "")
            at = tag.end(1) if own else m.end()
            if len(parts) <= 3 * MAX_NOTES:
                out.note("missing_tag", f"{s.ns} written as {text[m.start() + k : at]!r}")
        return "".join(parts) + text[at:] if parts else text

    def _each_tag(self, text: str, pos: int, lenient: bool) -> Iterator[_Tag]:
        """The tags after ``pos``; strictly (not ``lenient``), a token followed by no tag is an empty tag there."""
        s = self.spelling
        p = text.find(s.ns, pos)
        while p >= 0:
            nxt = text.find(s.ns, p + len(s.ns))
            tag = self._tag_at(text, p, len(text) if nxt < 0 else nxt, lenient=lenient)
            rest = text[p + len(s.ns) :] if tag is None and nxt < 0 else ""
            if tag is not None or not lenient:
                yield tag or _Tag(p, p, False, "", "")
            elif nxt < 0 and (not rest.strip() or (rest.lstrip().startswith("<") and ">" not in rest)):
                yield _Tag(p, len(text), False, "", "")  # the text ends inside a tag (marks a cut)
            p = nxt

    def _recover_invoke(self, text: str, tags: _Tags, i: int, calls: list[ToolCall], out: Lenient | None
                        ) -> int:
        """Reads the call opened by ``tags[i]`` into ``calls``, strictly when ``out`` is ``None`` (raising where it
        would recover): the index of the next tag to read (-1: the text or items ran out)."""
        s = self.spelling
        written = self._invoke_name(tags[i], out is not None) or ""
        name = written.strip()
        if not name:
            slip(self, out, "no_name", f"a call without a {s.name_attr}: {tags[i].raw[:60]!r}", tags[i].start)
        elif any(c.isspace() or c in '"<>' for c in name) or name != written:
            slip(self, out, "bad_name" if name == written else None, name_refused(written), tags[i].start)
        stack = [_Frame(s.invoke, "", [])]
        whole: dict[str, Any] = {}  # the arguments written whole (for a cut)
        deep = 0  # opening tags skipped for nesting too deeply, still open
        last_closed = True  # the last tag read closes an element (a text ending after it only lost closing tags)
        last_end = tags[i].end
        j = i + 1
        while j < len(tags) or tags.more(j):
            tag = tags[j]
            key = tag.raw.strip() if out is not None and not tag.raw.startswith('"') else tag.raw
            if out is None and (tag.start == tag.end or text[last_end : tag.start].strip() and not (
                    tag.closing and stack[-1].text is not None)):  # (text is a leaf's only)
                what = f"a {s.ns} token not followed by a tag" if tag.start == tag.end else "text between tags"
                raise self.error(f"{what}: {text[last_end : tag.start + 30][:60]!r}", last_end)
            if tag.raw == "" and tag.end == len(text):  # the text ends inside this tag
                last_closed = False
                break
            if self._invoke_name(tag) is not None or (tag.key if out is not None else tag.raw) == s.section:
                slip(self, out, "missing_tag", f"missing {s.invoke_close} after call {name[:60]!r}", tag.start)
                self._finish(calls, out, name, stack, tag.start)
                return j + 1 if tag.closing else j
            last_end = tag.end
            if tag.closing:
                last_closed = True
                j += 1
                if key == s.invoke:
                    if len(stack) > 1:
                        slip(self, out, "missing_tag", f"elements left open in call {name[:60]!r}", tag.start)
                    self._finish(calls, out, name, stack, tag.start)
                    return j
                if deep:
                    deep -= 1
                    continue
                at = next((d for d in range(len(stack) - 1, 0, -1) if stack[d].raw == key), 0)
                if out is None and at != len(stack) - 1:
                    raise self.error(f"expected {s.ns}</{stack[-1].raw[:40]}>, got </{key[:40]}>", tag.start)
                if not at:
                    slip(self, out, "unreadable", f"a stray </{key[:40]}> skipped", tag.start)
                    continue
                if at < len(stack) - 1:
                    slip(self, out, "missing_tag", f"missing </{stack[-1].raw[:40]}> before </{key[:40]}>", tag.start)
                while len(stack) > at:
                    done = self._pop(stack)
                    if done[2] is not None:
                        slip(self, out, None, f"argument {done[2]!r} given twice", tag.start)
                if len(stack) == 1:
                    whole[done[0]] = done[1]
                continue
            if out is not None and not take_items(1):
                return -1
            j += 1
            last_closed = False
            if deep or len(stack) > MAX_ARGUMENT_DEPTH:
                if not deep:
                    what = "elements nesting" if out is not None else "the arguments nest"
                    slip(self, out, "bad_argument", f"{what} deeper than {MAX_ARGUMENT_DEPTH} levels"
                         + (" dropped" if out is not None else ""), tag.start)
                deep += 1
                continue
            ahead = j < len(tags) or tags.more(j)
            body = text[tag.end : tags[j].start if ahead else len(text)]
            leaf = body.strip() or (ahead and tags[j].closing)
            stack.append(_Frame(key, tag.key, [], body if leaf else None))
        # the text ends inside this call: keep it as read, say where it stops
        slip(self, out, None, f"unclosed <{stack[-1].raw[:40]}> in call {name[:60]!r}", len(text))
        self._finish(calls, out, name, stack, len(text))
        clean = last_closed and bool(whole) and not text[last_end:].strip()
        out.mark_cut(len(out.calls) - 1 if name else None, name or None, whole, clean=clean)
        return -1

    def _pop(self, stack: list[_Frame]) -> tuple[str, Any, str | None]:
        """Closes the innermost element (a child of the one around it): its key, its value (children all ``<item>``
        make a list, not at the top; no children, the leaf's text typed) and a duplicate key (or ``None``)."""
        frame = stack.pop()
        value: Any = {}
        dup = None
        if stack and not frame.children:
            value = read_value(frame.text or "", False, (self.spelling.ns,))
        elif stack and all(is_item for _, is_item, _ in frame.children):
            value = [v for _, _, v in frame.children]
        else:
            for key, _, child in frame.children:
                dup = key if key in value else dup
                value[key] = child
        if stack:
            stack[-1].children.append((frame.key, frame.raw == self.spelling.item, value))
        return frame.key, value, dup

    def _finish(self, calls: list[ToolCall], out: Lenient | None, name: str, stack: list[_Frame], at: int) -> None:
        """Closes what is left open and adds the call to ``calls`` (when it has a name); ``at``: where it ends."""
        while len(stack) > 1:
            self._pop(stack)
        _, args, dup = self._pop(stack)
        if dup is not None:
            kept = ": the last value kept" if out is not None else ""
            slip(self, out, "bad_argument", f"argument {dup[:40]!r} given twice{kept}", at)
        if name:
            calls.append(ToolCall(name, args))

    def retype(self, calls: Sequence[ToolCall], tools: Mapping[str, Any]) -> list[ToolCall]:
        return retype_calls(calls, tools, settle=_retype)


_TAG_WORD = re.compile(r"</?([\w\-]+)")


@functools.lru_cache(maxsize=8)
def _look_alikes(s: NsXmlSpelling) -> tuple[int, str, re.Pattern, re.Pattern]:
    """How many marks precede the namespace token's word, the word in lower case; a pattern for the token written
    otherwise (a ``<`` after it); one for a call's name attribute at a line's start (maybe after another tag) whose
    token and tag were lost (group 2; group 1 takes the blanks before it once)."""
    pre, word, post = re.fullmatch(r"([^\w\s]*)(\w+)([^\w\s]*)", s.ns).groups()
    near = rf"([^\w\s]{{{max(len(pre) - 1, 0)},{len(pre) + 1}}})({re.escape(word)})[^\w\s]{{0,{len(post) + 1}}}?(?=\s{{0,8}}<)"
    name = rf"{re.escape(s.name_attr)}=?[\"'][^\"'<>\n]{{1,256}}[\"'][ \t]*>"
    lost = rf"(?m)^(?=([ \t]*))\1(?:<[^<>\n]{{1,40}}>[ \t]*)?({name})"
    return len(pre), word.lower(), re.compile(near, re.IGNORECASE), re.compile(lost)


def _retype(param: Any, value: Any, depth: int = 0) -> Any:
    """``value`` settled by ``param``'s declared type, nested values included (an empty element is an empty object
    or list; an object's ``<item>`` children read as a list are its ``item`` key)."""
    if param is None or depth > MAX_ARGUMENT_DEPTH:
        return value
    ptype = getattr(param, "type", None)
    if ptype not in ("array", "object"):
        return retype_value(param, value)
    if value == "":
        return [] if ptype == "array" else {}
    items, props = getattr(param, "items", None), getattr(param, "properties", None) or {}
    if ptype == "array":
        return [_retype(items, v, depth + 1) for v in value] if isinstance(value, list) and items is not None else value
    if isinstance(value, list) and "item" in props:
        value = {"item": value[0] if len(value) == 1 else value}
    return {k: _retype(props.get(k), v, depth + 1) for k, v in value.items()} if isinstance(value, dict) else value
