"""The markers of a set of formats (their tags and sentinel tokens, closers and other spellings): where each first
occurs in a text (:func:`find_markers`, one pass for detection and salvage), and the tables of formats and markers
detection and salvage walk (:class:`MarkerTable`). The registry's own table and search are
:func:`refiner.formats.base.marker_table` and :func:`refiner.formats.base.marker_positions`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any

# A marker head shared by more markers than this walks its occurrences (find_markers) ...
WALK_MARKERS = 6
# ... at most this many, before it searches for each marker left.
HEAD_WALK = 8
# Heads sharing their first character with at least this many others are found in one scan of the first SCAN_CHARS
# characters (find_markers).
SCAN_HEADS = 4
SCAN_CHARS = 4096


class _Head:
    """The markers sharing one head (their first two characters), as :func:`find_markers` looks for them."""

    def __init__(self, head: str, markers: Sequence[str]) -> None:
        self.head, self.markers, self.ascii, self.is_marker = head, tuple(markers), head.isascii(), head in markers
        self.ascii_markers = tuple(m for m in markers if m.isascii())
        longer = [m for m in markers if len(m) > 2]
        self.longer = len(longer)
        # a head of many markers: the longest of its longer markers written at a place (one match), and the markers
        # each of them begins with (also written there)
        self.walk = len(markers) > WALK_MARKERS
        self.longest: re.Pattern | None = None
        self.starts: dict[str, tuple[str, ...]] = {}
        if self.walk:
            longer.sort(key=len, reverse=True)
            self.longest = re.compile("|".join(map(re.escape, longer)))
            self.starts = {m: (m, *(o for o in longer if o != m and m.startswith(o))) for m in longer}


class MarkerTable:
    """The formats' markers, closers and other spellings (``also_read``), grouped by their first two characters, and
    the formats (in rank order) that detection and salvage ask by marker or by hook. ``contract``: the class whose own
    hooks answer no (a format that does not override one is not asked it)."""

    def __init__(self, fmts: Sequence[Any], contract: type) -> None:
        every = dict.fromkeys(
            m for f in fmts for m in (*f.detection.markers, *f.detection.closers, *f.detection.also_read) if m
        )
        self.known = frozenset(every)
        heads: dict[str, list[str]] = {}
        for m in every:
            heads.setdefault(m[:2], []).append(m)
        self.heads = [_Head(h, ms) for h, ms in heads.items()]
        # the heads sharing their first character with many others are found in one scan of the text for that
        # character followed by one of their second ones (two of them never overlap: none is that character twice);
        # the other heads are searched for one by one
        by_first: dict[str, list[_Head]] = {}
        for h in self.heads:
            by_first.setdefault(h.head[0], []).append(h)
        self.scans: list[tuple[str, re.Pattern, dict[str, _Head]]] = []
        self.searched: list[_Head] = []
        for c, hs in by_first.items():
            if len(hs) >= SCAN_HEADS and all(len(h.head) == 2 and h.head[1] != c for h in hs):
                seconds = "".join(re.escape(h.head[1]) for h in hs)
                self.scans.append((c, re.compile(f"{re.escape(c)}[{seconds}]"), {h.head: h for h in hs}))
            else:
                self.searched += hs
        for i, h in enumerate(self.heads):
            h.order = i  # (find_markers sorts the heads it found by it)
        # the tagged formats a marker lets read strictly (detection's rule 1: a format reads a text strictly only when
        # it holds one of its markers or other spellings), and those that need none, by rank
        self.rank = {f.name: i for i, f in enumerate(fmts)}
        self.tagged_always = tuple((i, f) for i, f in enumerate(fmts) if not f.detection.bare and not (
            f.detection.markers or f.detection.also_read))
        self.tagged_by_marker: dict[str, tuple[tuple[int, Any], ...]] = {}
        for i, f in enumerate(fmts):
            if not f.detection.bare:
                for m in dict.fromkeys((*f.detection.markers, *f.detection.also_read)):
                    self.tagged_by_marker[m] = (*self.tagged_by_marker.get(m, ()), (i, f))

        # each marker (with its other spellings) and closer by the formats it names, in rank order
        self.naming: dict[str, dict[str, tuple[Any, ...]]] = {"markers": {}, "closers": {}}
        for which, named in self.naming.items():
            for f in fmts:
                spelt = (*f.detection.markers, *f.detection.also_read) if which == "markers" else f.detection.closers
                for m in dict.fromkeys(spelt):
                    named[m] = (*named.get(m, ()), f)
        # the markers each tagged format shares with others (detection asks its sniff at the first of them)
        self.shared_markers: dict[str, tuple[str, ...]] = {}
        for f in fmts:
            spelt = dict.fromkeys((*f.detection.markers, *f.detection.also_read))
            shared = tuple(m for m in spelt if len(self.naming["markers"][m]) > 1)
            if shared and not f.detection.bare:
                self.shared_markers[f.name] = shared
        # salvage's walk over the markers: each marker's place in rank order, and those written at a line start
        self.marker_order = {m: i for i, m in enumerate(self.naming["markers"])}
        self.line_markers = tuple(m for m in self.naming["markers"] if m[:1] == "\n")
        # the formats each hook is asked of, in rank order: those with markers, the untagged ones, and those whose
        # class answers the hook (the contract's default answers no)
        self.with_markers = tuple(f for f in fmts if f.detection.markers)
        self.bare = tuple(f for f in fmts if f.detection.bare)
        self.bare_by_marker: dict[str, tuple[Any, ...]] = {}
        for f in self.bare:
            for m in dict.fromkeys(f.detection.markers):
                self.bare_by_marker[m] = (*self.bare_by_marker.get(m, ()), f)
        self.claiming_values = _answering(fmts, "claims_value", contract)
        self.claiming_texts = _answering(fmts, "claims_text", contract)
        self.reading_untagged = _answering(self.with_markers, "read_untagged", contract)
        # the markers and closers that may stand between a tool name and its arguments (salvage's NAME<token>{...}),
        # by their last character
        tokens: dict[str, list[str]] = {}
        for f in fmts:
            for m in (*f.detection.markers, *f.detection.closers):
                if len(m) > 2 and m not in tokens.get(m[-1], ()):
                    tokens.setdefault(m[-1], []).append(m)
        self.tokens_by_last = {c: tuple(ms) for c, ms in tokens.items()}

    def marked(self, found_at: Mapping[str, int]) -> list[Any]:
        """The tagged formats, in rank order, whose marker (or other spelling) is among ``found_at``, and those
        that need none."""
        got = dict(self.tagged_always)
        for m in found_at:
            got.update(self.tagged_by_marker.get(m, ()))
        return list(map(got.__getitem__, sorted(got)))

    def bare_marked(self, found_at: Mapping[str, int]) -> list[Any]:
        """The untagged formats, in rank order, one of whose markers is among ``found_at``."""
        got = {f.name: f for m in found_at for f in self.bare_by_marker.get(m, ())}
        return sorted(got.values(), key=lambda f: self.rank[f.name]) if len(got) > 1 else list(got.values())


def _answering(fmts: Sequence[Any], hook: str, contract: type) -> tuple[Any, ...]:
    """The formats whose class overrides ``hook`` of the ``contract`` (whose own answers no)."""
    default = getattr(contract, hook)
    return tuple(f for f in fmts if getattr(type(f), hook) is not default)


def find_markers(text: str, table: MarkerTable) -> dict[str, int]:
    """Where each marker of ``table`` first occurs in ``text``: marker -> position, for the markers that occur. The
    heads (a marker's first two characters) written in the text are found first: those sharing their first character
    with many others in one scan of the first :data:`SCAN_CHARS` characters (the rest searched for those not seen),
    the others one by one (those with other than ASCII characters not in an ASCII text). Per head written: a head of
    few markers searches for each of them; a head of many walks its first :data:`HEAD_WALK` occurrences, at each
    taking the longest of its markers written there (one regular expression match) and those that one begins with,
    and then searches for the markers not yet found."""
    out: dict[str, int] = {}
    ascii_text = text.isascii()
    written = [h for h in table.searched if (h.ascii or not ascii_text) and h.head in text]
    for c, pattern, heads in table.scans:
        if c in text:
            seen = set(pattern.findall(text, 0, SCAN_CHARS))
            if len(text) > SCAN_CHARS:  # (the rest of a long text: searched for the heads not seen yet)
                seen.update(head for head in heads if head not in seen and text.find(head, SCAN_CHARS - 1) >= 0)
            written += map(heads.__getitem__, seen)
    if len(written) > 1:
        written.sort(key=attrgetter("order"))
    for h in written:
        at = text.find(h.head)
        if not h.walk:
            for m in h.ascii_markers if ascii_text else h.markers:
                i = text.find(m, at) if len(m) > 2 else at
                if i >= 0:
                    out[m] = i
            continue
        if h.is_marker:
            out[h.head] = at
        left = h.longer
        longest, starts = h.longest.match, h.starts
        for _ in range(HEAD_WALK):
            match = longest(text, at)
            if match is not None:
                for m in starts[match.group()]:
                    if m not in out:
                        out[m] = at
                        left -= 1
            at = text.find(h.head, at + 1)
            if at < 0 or not left:
                break
        else:  # a head written often (``</`` in XML): the markers left are searched for
            for m in h.markers:
                if len(m) > 2 and m not in out:
                    i = text.find(m, at)
                    if i >= 0:
                        out[m] = i
    return out

