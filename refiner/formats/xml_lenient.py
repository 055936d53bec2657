"""Reading the XML parameter grammar (:class:`XmlReader`, part of :class:`~refiner.formats.xml_grammar.XmlParams`): one
walk over the tags, strict or recovering from cut texts, lost and misspelt tags, JSON arguments between a call's tags,
an answer written as a JSON string, closing tags with a number appended; tags written wrong are read by a row's hook
(:class:`TagStates`, by where the grammar stands) or as the row's tags they look like."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import (NAME_PATTERN, Lenient, marker_positions, marker_table, markup_name, name_refused,
                                  offered_tools)
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, lenient_json, take_items
from refiner.formats.lenient import run_together, written_before_cut
from refiner.formats.strict import JSON_DECODER, decode_at
from refiner.formats.tags import MAX_TAG_HITS, Hit, Speller, apply_edits, respelt, tag_hits, tag_word
from refiner.formats.text import skip_ws
from refiner.formats.xml_spelling import JSON_TYPES, TYPE_CHARS, _attrs, attrs_only, name_line
from refiner.formats.xmlvalues import MAX_ATTR_CHARS, Finder, read_key


def slip(fmt: Any, out: Lenient | None, kind: str | None, message: str, at: int) -> None:
    """A departure from ``fmt``'s grammar at ``at``: refused by a strict reading (``out`` is ``None``), else a ``kind``
    problem (none for ``None``: a recovery the lenient reading makes silently)."""
    if out is None:
        raise fmt.error(message, at)
    if kind is not None:
        out.note(kind, message)


class XmlReader:
    """The one reading of :class:`XmlParams`'s tags (spelling and value helpers through ``self``): lenient when given a
    :class:`Lenient`, else strict, raising the format's error where it would recover (:func:`slip`)."""

    def _walk(self, text: str, calls: list[ToolCall], out: Lenient | None) -> None:
        """Reads the calls of ``text`` (its tag suffixes dropped) after the reasoning into ``calls``."""
        s = self.spelling
        pos = self.answer_start(text)
        if out is not None:
            for fix in (_mend, getattr(s.hook, "respell", None) or _respell_generic):
                text = respelt(out, text, fix(self, text, pos))
        f = Finder(text) if out is not None else None  # (the lenient reading's searches for lost tags)
        first_key = f.next(s.key_open, pos) if f is not None else -1  # (strictly, a key outside calls is prose)
        closer = s.section_close or s.call_close
        in_section = False
        c = f.next(s.call_open, pos) if f is not None else -1
        if 0 <= first_key < (c if c >= 0 else len(text)) and (at := self._lost_opener(text, first_key)) >= 0:
            out.note("missing_tag", f"missing {s.call_open.strip()} before {text[at:first_key].strip()[:60]!r}")
            pos, in_section = self._recover_call(text, at, f, calls, out)  # (the first call, its opening tag lost)
        for n in range(MAX_RECOVERED_ITEMS + 1) if out is not None else itertools.count():
            c = text.find(s.call_open, pos)
            if out is None and c > pos and (stray := text.find(closer, pos, c)) >= 0:  # a call before it lost its
                raise self.error(f"{closer} without its {s.first_open}", stray)  # opening tag
            if c < 0:
                o = text.find(s.section_open, pos) if out is None and s.section_open else -1
                if o < 0 and (n > 0 or calls):
                    return
                what = s.call_open + ("NAME>" if s.name_at == "eq" else "")
                if o >= 0:
                    o = skip_ws(text, o + len(s.section_open))
                    raise self.error(f"expected {what} after {s.section_open}, got {text[o : o + 30]!r}", o)
                slip(self, out, "missing_tag", f"no {what} found", pos)  # (the first call: n is 0 here)
                if first_key >= 0:
                    out.note("no_name", f"arguments without a {s.call_open}: no call can be named")
                return
            if out is not None:
                if n == 0 and pos <= first_key < c:
                    out.note("unreadable", f"arguments before the first {s.call_open} dropped")
                if not take_items(1):  # (the parse's count of items read: a gave_up problem)
                    return
            if s.section_open and not in_section:
                o = text.find(s.section_open, pos, c + len(s.section_open))
                if o < 0:
                    slip(self, out, "missing_tag", f"missing {s.section_open} before call #{n + 1}", c)
                elif skip_ws(text, o + len(s.section_open)) != c:
                    slip(self, out, "unreadable", f"text skipped before {s.call_open}: "
                               f"{text[o + len(s.section_open) : c][:60]!r}", o + len(s.section_open))
            pos, in_section = self._recover_call(text, c + len(s.call_open), f, calls, out)

    def _tag_attrs(self, raw: str, which: str | None, opener: str, out: Lenient | None, pos: int) -> dict[str, str]:
        """The attributes of the tag ``opener`` + ``raw``, ended by ``which``; a closed tag holding more than its
        attributes (a quote lost) is refused strictly, read loosely and noted leniently."""
        if which == self.spelling.tag_end and not attrs_only(raw):
            slip(self, out, "mended", f"a quote lost in the tag {opener}{raw[:60]}{which}", pos)
        return _attrs(raw, out is not None)

    def _lost_opener(self, text: str, key: int) -> int:
        """Where :meth:`_recover_call` reads the name of a first call whose opening tag was lost or written wrong, its
        first key tag at ``key``: a tool's name (offered, when the tools are known) as the tag holds it (``name="f">``,
        ``f>`` or ``f`` and its separator, alone or after a tag) ending the key's line or the one above; else -1."""
        s = self.spelling
        name = r"([^\s<>{}\"'=|]+)"
        attr = rf'{re.escape(s.name_attr)}\s*=\s*"{name}"(?:\s+[\w\-]+\s*=\s*"[^"<>]*")*\s*/?'  # (others after it)
        end = attr if s.name_at == "attr" else rf"(?:^|(?<=[>\]|=\n]))[ \t]*{name}"  # (not a word of prose)
        close = s.tag_end if s.name_at != "text" else s.name_sep.strip()
        m = re.compile(rf"{end}\s*{re.escape(close)}\s*\Z").search(text, name_line(text, key), key)
        tools = offered_tools()
        if m is None or not self.is_name(m[1]) or markup_name(m[1]) or tools is not None and m[1] not in tools:
            return -1
        return m.start() if s.name_at == "attr" else m.start(1)

    def _tag_end(self, text: str, pos: int, at: str, out: Lenient | None) -> tuple[str | None, str, int]:
        """``(what ends it, its text, where what follows starts)`` for the opening tag at ``pos``, naming by ``at``: its
        end, else a line break (leniently, or naming by ``=``), else, for an attribute tag, the next tag; ``None``: the
        text ends inside it. Its text stops at :data:`MAX_ATTR_CHARS` (a longer tag is refused strictly)."""
        s = self.spelling
        m = self._stops[at][out is None].search(text, pos)
        if m is None:
            which, end, after = None, len(text), len(text)
        elif (which := m.group()) == s.tag_end:
            end, after = m.span()
        else:  # (what follows starts at the line break or the next tag)
            end = after = m.start()
            if which == "<" and len(text) - end <= len(s.tag_end) and s.tag_end.startswith(text[end:]):
                which, end, after = None, len(text), len(text)  # (the text ends inside the tag's end)
        if end - pos > MAX_ATTR_CHARS:
            if out is None:
                raise self.error(f"a tag longer than {MAX_ATTR_CHARS} characters", pos)
            end = pos + MAX_ATTR_CHARS
        return which, text[pos:end], after

    def _recover_call(self, text: str, pos: int, f: Finder | None, calls: list[ToolCall], out: Lenient | None
                      ) -> tuple[int, bool]:
        """Reads one call after its tag: ``(where reading goes on, whether its section goes on)``."""
        s = self.spelling
        lost_key = 0
        if s.name_at == "text":
            m = self._stops["text"][out is None].search(text, pos)
            e, tag = (m.start(), m.group()) if m else (len(text), None)
            name = text[pos:e].strip()
            head = name[: name.find(s.key_close)] if out is not None and s.key_close and s.key_close in name else ""
            lost_key = run_together(head) if head and WORD.fullmatch(head) else 0  # (a word: not prose, not tags)
            if lost_key:  # the first key's opening tag lost between the name and the key: the key read from there
                out.note("missing_tag", f"missing {s.key_open} between {head[:lost_key]!r} and its first key")
                pos, name = text.index(head, pos) + lost_key, head[:lost_key]
            else:
                pos = e + len(s.name_sep) if tag == s.name_sep and s.name_sep.strip() else e
        else:
            which, raw, pos = self._tag_end(text, pos, s.name_at, out)
            if s.name_at == "eq":
                written = raw
            else:
                written = self._tag_attrs(raw, which, s.call_open, out, pos).get(s.name_attr, "")
            name = written.strip()
            if which != s.tag_end or name != written:
                if which is None:  # cut inside the name: no call can be trusted
                    slip(self, out, "unclosed", f"the text ends inside the tool name {name[:60]!r}", pos)
                    out.mark_cut(None)
                    return pos, False
                if which != s.tag_end:
                    slip(self, out, "missing_tag", f"the {s.call_open}{name}{s.tag_end} tag is not closed", pos)
                if name != written:
                    slip(self, out, None, name_refused(written), pos)
        markup = out is not None and markup_name(name)  # (the strict reading holds a name to the row's pattern)
        if markup or not self.is_name(name):
            slip(self, out, "markup_name" if markup else "bad_name" if name else "no_name", name_refused(name) if name
                 else f"a {s.call_open.strip()} block without a tool name", pos)
        name = "" if markup else name  # (the call's body is read past; no call is made)
        args: dict[str, Any] = {}
        closed = s.name_at == "attr" and which == s.tag_end and raw.endswith("/")  # (a call without arguments)
        whole = pos  # where the last value written whole ends (the name, at first)
        cut: tuple[dict[str, Any], bool] | None = None  # the text stops inside this call: (written whole, clean)
        while pos < len(text) and not closed:
            m = self._next_tag.match(text, pos)  # (whitespace, then the call's closing tag or a key tag, or neither)
            pos = m.end()
            if m.lastindex == 1:
                closed = True
                break
            if m.lastindex == 2 or lost_key:
                lost_key = 0
                if out is not None and not take_items(1):  # the rest is not read: this call, read in part, is left
                    return len(text), False  # out
                pos, cut_key = self._recover_param(text, pos, f, args, out)
                if cut_key is None:
                    whole = pos
                else:  # the text ends inside this parameter's value
                    cut = {k: v for k, v in args.items() if k != cut_key}, False
                continue
            if out is None and pos < len(text):
                raise self.error(f"expected {s.key_open} or {s.call_close}, got {text[pos : pos + 30]!r}", pos)
            nxt, tag = f.first([t for t in (s.key_open, s.call_close, s.call_open, s.section_close, s.section_open)
                                if t], pos)
            junk = text[pos:nxt]
            value = lenient_json(junk, at_end=tag is None) if junk.startswith("{") and not args else None
            if isinstance(value, dict):  # JSON arguments inside the call's tags (as Llama 3.1 writes them)
                out.note("missing_tag", f"arguments of {name!r} written as JSON instead of {s.key_open} tags")
                args.update((str(k), v) for k, v in value.items())
                cut, whole = written_before_cut(value), nxt
            elif (label := self._lost_key(junk)) and s.value_close in junk[label.end() :]:  # KEY>VALUE</close>
                out.note("missing_tag", f"missing {s.key_open} before {label[0][:40]!r}")
                pos, lost_key = pos + label.start(), 1
                continue
            elif tag in (s.key_open, s.call_close) or junk.strip():
                out.note("unreadable", f"text skipped in call {name!r}: {junk[:60]!r}")
            pos = nxt
            if tag not in (s.key_open, s.call_close):
                break
        if not closed:
            slip(self, out, "missing_tag", f"missing {s.call_close} after call {name!r}", pos)
            if s.name_at == "text" and not args:  # a name line alone: a cut text or prose mentioning the tag
                out.note("unreadable", f"a {s.call_open} with neither arguments nor {s.call_close} dropped: "
                         f"{name[:60]!r}")
                self._mark_cut(text, whole, out, "", args, cut)
                return pos, False
        if name and not args and self._junk_name(name):
            slip(self, out, "not_a_call", f"{name[:60]!r} alone between call tags is text, not a call", pos)
            name = ""
        if name:
            calls.append(ToolCall(name, args))
        if not closed:
            self._mark_cut(text, whole, out, name, args, cut)
        if not s.section_open:
            return pos, False
        k = skip_ws(text, pos)
        if text.startswith(s.section_close, k):  # read on past the section's closer
            return k + len(s.section_close), False
        if not s.section_per_call and text.startswith(s.call_open, k):
            return pos, True
        kind = "missing_tag" if s.section_per_call or k < len(text) else None
        slip(self, out, kind, f"missing {s.section_close} after call {name!r}", k)
        return pos, False

    def _lost_key(self, junk: str) -> re.Match | None:
        """A key whose opening tag was lost or written wrong, in text inside a call before any tag: ``KEY>`` at its
        start (``eq`` rows), or ``name="KEY" ...>`` near its start (``attr`` rows)."""
        s, lead = self.spelling, len(junk) - len(junk.lstrip())
        if s.key_at == "eq":
            return LABEL.match(junk, lead)
        at = junk.find(f'{s.key_attr}="', lead, lead + LOST_KEY_CHARS) if s.key_at == "attr" else -1
        return self._key_attrs.match(junk, at) if at >= 0 else None

    def _mark_cut(self, text: str, whole: int, out: Lenient, name: str, args: dict[str, Any],
                  cut: tuple[dict[str, Any], bool] | None) -> None:
        """Marks the call just read, whose closing tag never came, as the one the text stops in: ``cut`` (written
        whole, clean) when the text ends in a value; else, after its last value written whole (at ``whole``), clean
        when only closers are missing, not clean in a key tag or another format's opening marker, else not cut."""
        if cut is None:
            s = self.spelling
            closers = s.call_close + (s.section_close if s.section_per_call else "")
            i = skip_ws(text, whole)
            raw = text[i : i + 2 * len(closers)]
            if skip_ws(text, i + len(raw)) < len(text):
                return
            rest = "".join(raw.split())  # whitespace aside, in the tags too (DSML V4.1 writes "<｜DSML｜ parameter ")
            naming = marker_table().naming["markers"]  # (the formats each opening marker is of)
            opened = any(p == 0 and self not in naming.get(m, (self,)) for m, p in marker_positions(raw).items())
            in_key = bool(rest) and (opened or "".join(s.key_open.split()).startswith(rest))
            if rest and not in_key and not "".join(closers.split()).startswith(rest):
                return
            cut = dict(args), not in_key and bool(args)
        out.mark_cut(len(out.calls) - 1 if name else None, name or None, *cut)

    def _recover_param(self, text: str, pos: int, f: Finder | None, args: dict, out: Lenient | None
                       ) -> tuple[int, str | None]:
        """Reads one parameter into ``args``: ``(where reading goes on, its key when the text ends in its value)``."""
        s = self.spelling
        typ: str | None = None
        if s.key_at == "element":
            m = self._stops["element"][out is None].search(text, pos)
            j, which = (m.start(), m.group()) if m else (len(text), None)
            raw = text[pos:j]
        else:
            which, raw, vstart = self._tag_end(text, pos, s.key_at, out)
        if s.key_at != "attr":
            key = read_key(raw, raw.strip() if out is not None else None)
            if key is None:
                raise self.error("a quoted parameter name is not a JSON string", pos)
        else:
            attrs = self._tag_attrs(raw, which, s.key_open, out, pos)
            if which is None and s.key_attr not in attrs:  # the text ends inside the key: the parameter is left out
                slip(self, out, None, f"unclosed {s.key_open}", pos)
                return vstart, ""
            key = attrs.get(s.key_attr, raw.strip())
        if s.key_at == "element":
            if which == s.key_close:
                pos = skip_ws(text, j + len(s.key_close))
            else:
                slip(self, out, "missing_tag", f"missing {s.key_close} after key {key[:40]!r}", j)
                pos = skip_ws(text, j)
            if s.type_open and out is not None and text.startswith(s.type_open, pos):  # a type element (see
                t = text.find(s.type_close, pos, pos + len(s.type_open) + TYPE_CHARS)  # XmlSpelling): lenient only
                if t >= 0:
                    kind = text[pos + len(s.type_open) : t].strip().lower()
                    typ = "string" if kind == "string" else None if kind in ("any", "") else ""
                    pos = skip_ws(text, t + len(s.type_close))
            if text.startswith(s.value_open, pos):
                vstart = pos + len(s.value_open)
            else:  # the value's opening tag was lost: the value is the text up to the next tag
                slip(self, out, "missing_tag", f"missing {s.value_open} after key {key[:40]!r}", pos)
                vstart = pos
                nxt, _ = f.first((s.value_close, s.key_open, s.call_close, s.call_open), pos)
                if not text[pos:nxt].strip():
                    out.note("bad_argument", f"key {key[:40]!r} without a value dropped")
                    after = nxt + len(s.value_close) if text.startswith(s.value_close, nxt) else nxt
                    return after, key if nxt >= len(text) else None
        else:
            if which != s.tag_end:
                slip(self, out, "missing_tag", f"the {s.key_open}{key[:40]}{s.tag_end} tag is not closed", pos)
            if s.key_at == "attr":
                if s.key_attr not in attrs:
                    slip(self, out, None, f"a {s.key_open} without a {s.key_attr}", pos)
                if out is None and s.refused_attr in attrs:
                    raise self.error(f"a {s.refused_attr}= attribute: another row's typed parameter", pos)
                typ = self._type_of(attrs, pos if out is None else None)
        if out is None:  # the value as the templates write it
            if key in args:
                raise self.error(f"parameter {key!r} given twice", vstart)
            if s.typing == "named" and typ != "string":  # JSON, then the closing tag
                args[key], end = decode_at(self, text, vstart)
                if typ in JSON_TYPES and type(args[key]) not in JSON_TYPES[typ]:
                    raise self.error(f"{key!r} is typed {typ!r} but holds {type(args[key]).__name__}", vstart)
                end = skip_ws(text, end)
                if not text.startswith(s.value_close, end):
                    raise self.error(f"expected {s.value_close} after the value of {key!r}", end)
            else:
                end = self._value_end(text, vstart)
                args[key] = self._value(text[vstart:end], typ)
            return end + len(s.value_close), None
        # the value ends at its closing tag, unless a new parameter (on a new line, for raw-text keys) or the end of
        # the call or section comes first (the closing tag was lost), or at the end of the text (cut short)
        next_key = s.key_open if s.key_at == "element" or not s.sep else "\n" + s.key_open
        stop_tags = (next_key, s.call_close) + ((s.section_close, s.section_open) if s.section_open else (s.call_open,))
        close = f.next(s.value_close, vstart)
        stop, tag = f.first(stop_tags, vstart)
        if tag is not None and not 0 <= close <= stop and (
                f.first(tuple(t for t in (s.call_open, s.section_open) if t), vstart)[0] <= stop
                or any(m in marker_table().naming["markers"] for m in marker_positions(text[vstart:stop]))):
            # a call opens in the value before its close (the row's call or section tag, or any marker, before stop):
            # raw values hold tags, so it ends at its close if no key tag comes first; no close: the text stops in it
            if close < 0:
                stop, tag = len(text), None
            elif not 0 <= f.next(s.key_open, vstart) < close:
                stop = close
        cut = False
        if 0 <= close <= stop:
            last = text.rfind(s.value_close, close, stop)  # (a value holding its closing tag, and no key tag)
            if last > close and not text[last + len(s.value_close) : stop].strip() and s.key_open not in text[
                    close:last]:
                close = last
            end, after = close, close + len(s.value_close)
        else:
            end, after = stop, stop
            if tag is None:
                out.note("unclosed", f"parameter {key[:40]!r} cut short")
                cut = True
            else:
                out.note("missing_tag", f"missing {s.value_close} after parameter {key[:40]!r}")
                if not s.strip_newline:
                    end = vstart + len(text[vstart:end].rstrip())  # the newline the template puts before the tag
                elif tag != next_key and text.startswith("\n\n", end - 2):
                    end -= 1  # the template's newlines on both sides of the lost tag
        if key in args:
            out.note("bad_argument", f"parameter {key[:40]!r} given twice: the last value kept")
        raw = text[vstart:end]
        if s.typing != "named" or typ == "string":
            args[key] = self._value(raw, typ)
        elif cut:  # typed by name as JSON: what its start holds
            args[key] = lenient_json(raw, at_end=True)
        else:  # decoded, else mended, else its text
            try:
                args[key] = JSON_DECODER.decode(raw.strip())
            except (ValueError, RecursionError):
                args[key] = lenient_json(raw.strip(), at_end=False)
                if args[key] is None:
                    out.note("bad_argument", f"argument {key[:40]!r} typed {typ!r} is not JSON: kept as text")
                    args[key] = raw
                else:
                    out.note("mended", f"the JSON value of argument {key[:40]!r} was mended")
        return after, key if cut else None

_speller = functools.lru_cache(maxsize=64)(Speller)  # one per row's tags


_LOST_NAME = re.compile(r"""name\s*=\s*(?:"[^"\n<>]*"|'[^'\n<>]*')\s*/?>""")
LINE_INDENT_CHARS = 64  # how far before a lost tag's name="..." its line start is looked for


def _respell_generic(fmt: Any, text: str, start: int) -> tuple[str, list[str]] | None:
    """Tags written wrong, for a row without a hook of its own: a look-alike of a row's tag
    (:mod:`refiner.formats.tags`) read as it; for rows naming in attributes, a lost call or parameter tag put back
    before a line's ``name="..."``. ``None`` when nothing changed."""
    s = fmt.spelling
    tags = tuple(t for t in s.tags() if t.endswith((">", " ")))
    edits: list[tuple[int, int, str]] = []
    notes: list[str] = []
    speller = _speller(tags)
    if speller.written_wrong(text, start):
        by_word = {(tag_word(t.rstrip()), t.startswith(("</", "[/"))): t for t in reversed(tags)}  # (the first kept)
        in_value = False
        value_word = tag_word(s.value_close.rstrip())
        for h in tag_hits(speller, text, start):
            tag = by_word.get((h.word, h.closing))  # (None for another format's tag)
            if in_value and h.word == value_word and not h.closing:
                tag = s.value_close  # the closer written without its slash
            if tag is None:
                continue
            in_value = tag == (s.value_open or s.key_open) or in_value and tag != s.value_close  # (opened, or not closed)
            if h.exact:
                continue
            new = tag.rstrip() if tag.endswith(" ") and text[h.end : h.end + 1] in (" ", "\t", "\n") else tag
            if new == text[h.start : h.end]:
                continue  # an attribute tag written as it is (the speller reads it without its space)
            edits.append((h.start, h.end, new))
            notes.append(f"tag {text[h.start : h.end][:40]!r} read as {new.strip()}")
    if s.name_at == "attr" and "name" in text:
        for m in itertools.islice(_LOST_NAME.finditer(text, start), MAX_TAG_HITS):
            lo = max(start, m.start() - LINE_INDENT_CHARS)
            before = text[lo : m.start()]
            nl = before.rfind("\n")
            if before[nl + 1 :].strip() or (nl < 0 and lo > start):
                continue  # not at the start of its line: a tag's own attribute (or prose)
            after = skip_ws(text, m.end())
            if after >= len(text) or text.startswith((s.key_open, s.call_close), after):
                put = s.call_open  # the call's name: parameters or the call's end follow
            elif s.key_at == "attr":
                put = s.key_open  # a value follows
            else:
                continue
            edits.append((m.start(), m.start(), put))
            notes.append(f"missing {put.strip()} put back before {m.group(0).strip()[:40]!r}")
    return (apply_edits(text, edits), notes) if edits else None


def _mend(fmt: Any, text: str, pos: int) -> tuple[str, list[str]] | None:
    """The text with JSON string escapes decoded when a literal ``\\n`` stands next to a structural tag, and
    closing tags with a number appended (``</parameter1>``) read as the tag; ``None`` when nothing changed."""
    s = fmt.spelling
    notes = []
    body = text[pos:]
    # (a literal \n where the render has a line break between tags; one ending or starting a value is the value's)
    marks = ("\\n" + s.key_open, s.value_close + "\\n", "\\n" + s.call_close, s.call_close + "\\n")
    if "\\n" in body and any(m in body for m in marks):
        body = _JSON_ESCAPE.sub(lambda m: JSON_DECODER.decode(f'"{m.group()}"'), body)
        notes.append("the calls were written with JSON string escapes (a literal \\n between tags): read decoded")
    for close in (s.value_close, s.call_close, s.key_close if s.key_at == "element" else ""):
        if close.endswith(">") and close[:-1] in body:
            body, n = re.subn(re.escape(close[:-1]) + r"\d{1,3}>", close, body)
            if n:
                notes.append(f"a closing tag with a number appended read as {close}")
    return (text[:pos] + body, notes) if notes else None


_JSON_ESCAPE = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})')  # (one escape, decoded as a JSON string)


# Where TagStates' reading stands; SECTION: in a section before its call, CALL: between a call's parameters.
OUT, SECTION, CALL, IN_KEY, AFTER_KEY, IN_VALUE, AFTER_CALL = range(7)
LABEL = re.compile(r"[^\s<>{}\"'=]+>")  # a name or key ended by ">", after a tag ending in "="
LOST_KEY_CHARS = 64  # of text in a call searched for the key attribute of a tag whose opening was lost
WORD = re.compile(NAME_PATTERN)  # a tool name standing alone on its line: one word, not prose


class TagStates:
    """A hook's respelling of a row whose calls are ``[S] C NAME (K KEY [KE] [V] VALUE VE)* CE [SE]`` (each a pair
    ``(open, close)``, ``""`` for a tag the row lacks): with ``KE``, a name and a key are text ended by the next tag;
    without, labels (``NAME>``, ``KEY>``) after tags ending in ``=``. ``expected``: the tags a look-alike is read as
    outside a section or call (``OUT``) and between a call's parameters (``CALL``); elsewhere, the tag due there.
    ``stray_close``: a ``VE`` right after a call's name is dropped."""

    def __init__(self, section: tuple[str, str], call: tuple[str, str], key: tuple[str, str], value: tuple[str, str],
                 expected: dict[int, tuple[str, ...]], stray_close: bool = False) -> None:
        (self.s, self.se), (self.c, self.ce), (self.k, self.ke), (self.v, self.ve) = section, call, key, value
        tags = tuple(t for t in (self.s, self.c, self.k, self.ke, self.v, self.ve, self.ce, self.se) if t)
        self.speller, self.stray_close = Speller(tags), stray_close
        self.expected = {IN_KEY: (self.ke,), AFTER_KEY: (self.v,), IN_VALUE: (self.ve,), SECTION: (self.c,),
                         AFTER_CALL: (self.se, self.s), **expected}
        self._by = {(tag_word(t), t.startswith("</")): t for t in tags}
        self.after_call = (self.se, self.s) if self.s else (self.c,)  # what may follow a call's closing tag
        moves = ((self.s, SECTION), (self.c, CALL), (self.k, IN_KEY if self.ke else IN_VALUE), (self.ke, AFTER_KEY),
                 (self.v, IN_VALUE), (self.ve, CALL), (self.ce, AFTER_CALL if self.s else OUT), (self.se, OUT))
        self._next = {t: state for t, state in moves if t}

    def respell(self, fmt: Any, text: str, start: int) -> tuple[str, list[str]] | None:
        """The hook's ``respell``: each tag token of ``text[start:]`` read by where the grammar stands, from ``OUT``
        (:meth:`_step`); a token read as another tag is respelt and moves the state, the last, unless written as a
        closer, closing only its own tag (the text was cut there). The text and notes; ``None`` if nothing changed."""
        edits: list[tuple[int, int, str]] = []  # (start, end, new text)
        notes: list[str] = []

        def put(a: int, b: int, new: str, note: str) -> None:
            edits.append((a, b, new))
            notes.append(note)

        hits = tag_hits(self.speller, text, start)
        state, prev_end, prev_role = OUT, start, None
        for h, nxt in zip(hits, [*hits[1:], None]):
            role = self._step(text, state, h, nxt, prev_end, prev_role, put)
            if role is None or not nxt and role[:2] == "</" != text[h.start : h.start + 2] and h.word != tag_word(role):
                continue  # text of a value or prose, as written
            if role != text[h.start : h.end]:
                put(h.start, h.end, role, f"tag {text[h.start : h.end][:40]!r} read as {role}")
            state, prev_end, prev_role = self._next[role], h.end, role
        return (apply_edits(text, edits), notes) if edits else None

    def role(self, hit: Hit | None) -> str | None:
        """The tag a token spells as written (``None``: another format's tag, no token, or a tag ending in ``=``
        that lost both its ``=`` and its ``>``)."""
        if hit is None or hit.word is None:
            return None
        tag = self._by[hit.word, hit.closing]
        if tag.endswith("=") and not hit.eq:
            return self._by[hit.word, True] if hit.ended else None
        return tag

    def _step(self, text: str, state: int, h: Hit, nxt: Hit | None, prev_end: int, prev_role: str | None,
              put: Callable[[int, int, str, str], None]) -> str | None:
        """The tag the token ``h`` is read as where the grammar stands (``None``: text): a look-alike of a tag
        expected there is that tag (of the closing tag that belongs there); another format's tag, or a look-alike
        not expected there, is the tag expected there when what follows fits it, else text; a lost ``C`` (``K``) is
        put back before the name (key) above the first tag of the call (of the parameter)."""
        own, next_own = self.role(h), self.role(nxt)
        alien = own is None or (not h.exact and own not in self.expected[state])
        exact = own if h.exact else None
        if prev_role and prev_role.endswith("=") and (m := LABEL.match(text, prev_end)):
            prev_end = m.end()  # the name or key that follows, and its ">"
        before, after = text[prev_end : h.start], text[h.end : nxt.start if nxt else len(text)]
        after_blank = not after.strip()
        if state == IN_VALUE:
            ends = nxt is not None and after_blank and (alien or own == self.v) and (
                next_own in (self.k, self.ce, self.after_call[0]) or (nxt.word is None and not nxt.exact))
            return self.ve if own == self.ve or ends else exact
        if state == IN_KEY:
            ends = (own == self.k or alien) and before.strip() and "\n" not in before.strip()
            return self.ke if own == self.ke or ends else exact
        if state == AFTER_KEY:
            return self.v if own == self.v or (alien and not before.strip()) else exact
        outer = self.s or self.c
        if state == (AFTER_CALL if self.s else CALL) and own == outer and after_blank and (
                nxt is None or next_own == outer):
            return self.se or self.ce  # the opening tag written for the closing one, before the next or the end
        if state == CALL:
            if self.stray_close and own == self.ve and prev_role == self.c and after_blank and next_own in (
                    self.ce, self.c):  # (seen from GLM-5, after the name of a call without arguments)
                put(h.start, h.end, "", f"a stray {self.ve} after the tool name dropped")
                return None
            if alien:
                if self._label(after) or (self.ke and not after_blank and next_own in (self.ke, self.k)):
                    return self.k
                return self.ce if after_blank and (nxt is None or next_own in self.after_call or nxt.word is None) else None
            lost_key = own == (self.ke or self.ve)  # (put back before the key; without one, text unless exact)
            if lost_key and not self._put_back(text, prev_end, h.start, self.k, put, prev_role == self.c) and (
                    self.ke or not h.exact):
                return None
        elif state == AFTER_CALL and alien:
            return self.se if after_blank else None
        elif state == (SECTION if self.s else OUT):  # before a call
            if alien:
                named = self.ke and next_own in (self.k, self.ce) and WORD.fullmatch(after.strip())
                return self.c if named or self._label(after) else None
            if own in ((self.k,) if self.ke else (self.k, self.ce)):  # its call tag was lost
                self._put_back(text, prev_end, h.start, self.c, put)
        return None if alien else own

    def _label(self, after: str) -> bool:
        """Whether the text after a tag is a label (``NAME>``, ``KEY>``) on one line (rows with labels)."""
        return not self.ke and LABEL.match(after) is not None and "\n" not in after[: after.find(">")]

    def _put_back(self, text: str, lo: int, hi: int, tag: str, put: Callable[..., None], after_name: bool = False
                  ) -> bool:
        """Puts a lost ``C`` or ``K`` (``tag``) back before the name or key written between ``lo`` and the tag at
        ``hi``, when there is one: the span's last line holding text (a one-word name; ``after_name``: not its first
        line), or, for labels, the label at ``lo`` (a key's alone on its line, a name's with only blanks after it)."""
        name = tag == self.c
        if self.ke:
            seg = text[lo:hi].rstrip()
            nl = seg.rfind("\n")
            at = skip_ws(text, lo + nl + 1)
            if at >= lo + len(seg) or (nl < 0 and after_name) or (name and not WORD.fullmatch(text[at:hi].strip())):
                return False
            written = text[at:hi].strip()
        else:
            at = skip_ws(text, lo)
            m = LABEL.match(text, at)
            if m is None or (text[m.end() : hi].strip() if name else not text.startswith("\n", m.end())):
                return False
            written = text[at : m.end()]
        put(at, at, tag, f"missing {tag} put back before {written[:40]!r}")
        return True
