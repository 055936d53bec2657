"""The markers of a set of formats (tags, sentinel tokens, closers, other spellings): where each first occurs in a
text (:func:`find_markers`), and the tables of formats and markers detection and salvage walk (:class:`MarkerTable`)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# A first character that begins at least this many markers is searched for with one pattern (a trie) of them.
TRIE_MARKERS = 8


def trie(markers: Iterable[str]) -> str:
    """A regular expression matching the longest of ``markers`` written at a place (their trie: at each branch the
    longer markers are tried before the one ending there, so a text of near-misses such as ``<a><a>...`` costs a step
    per character, not one per marker); no markers: one that matches nothing."""
    root: dict[str, Any] = {}
    for m in markers:
        node = root
        for c in m:
            node = node.setdefault(c, {})
        node[""] = {}

    def branch(node: dict[str, Any]) -> str:
        alts = [re.escape(c) + branch(child) for c, child in node.items() if c]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})"
        return f"(?:{body})?" if "" in node else body

    return branch(root) or "(?!)"


class MarkerTable:
    """The formats' markers, closers and other spellings, grouped by their first character, and the formats (in
    rank order, none read only by name) that detection and salvage ask by marker or by hook. ``contract``: the class
    whose own hooks answer no (a format that does not override one is not asked it)."""

    def __init__(self, fmts: Sequence[Any], contract: type) -> None:
        fmts = [f for f in fmts if not f.detection.by_name]
        every = dict.fromkeys(
            m for f in fmts for m in (*f.detection.markers, *f.detection.closers, *f.detection.also_read) if m
        )
        self.known = frozenset(every)
        self._any = re.compile(trie(every))
        # markers by their first character: those of a character that begins many are found by one pattern
        by_first = _grouping((m[0], m) for m in every)
        tries = {c: ms for c, ms in by_first.items() if len(ms) >= TRIE_MARKERS}
        self.patterns = tuple(re.compile(trie(ms)) for ms in tries.values())
        # the others grouped by their first three characters: (the prefix they share, the markers)
        heads = _grouping((m[:3], m) for ms in by_first.values() if len(ms) < TRIE_MARKERS for m in ms)
        self.single = tuple((os.path.commonprefix(ms), ms) for ms in heads.values())
        # the markers a pattern's match may hold: those inside it and those that begin inside it, after its start, and
        # run past its end (a match is the longest marker written where it begins)
        self.held = {w: tuple(dict.fromkeys(m for i, c in enumerate(w) for m in tries.get(c, ())
                                            if w.startswith(m, i) or 0 < i and m.startswith(w[i:])))
                     for ms in tries.values() for w in ms}
        # the tagged formats a marker lets read strictly (detection's rule 1), and those that need none, by rank
        self.rank = {f: i for i, f in enumerate(fmts)}
        self.tagged_always = tuple(f for f in fmts if not f.detection.bare and not (
            f.detection.markers or f.detection.also_read))
        by_marker, same = _grouping((m, f) for f in fmts if not f.detection.bare for m in (
            f.detection.strict_needs or _spelt(f))), {}
        self.tagged_by_marker = {m: same.setdefault(fs, fs) for m, fs in by_marker.items()}  # (equal tuples: one)
        # each marker (with its other spellings) and closer by the formats it names, in rank order
        self.naming = {"markers": _grouping((m, f) for f in fmts for m in _spelt(f)),
                       "closers": _grouping((m, f) for f in fmts for m in dict.fromkeys(f.detection.closers))}
        # the markers each tagged format shares with others (detection asks its sniff at the first of them)
        self.shared_markers = {f: shared for f in fmts if not f.detection.bare and (
            shared := tuple(m for m in _spelt(f) if len(self.naming["markers"][m]) > 1))}
        # salvage's walk over the markers: each marker's place in rank order, and those written at a line start
        self.marker_order = {m: i for i, m in enumerate(self.naming["markers"])}
        self.line_markers = tuple(m for m in self.naming["markers"] if m[:1] == "\n")
        # the formats each hook is asked of, in rank order
        self.with_markers = tuple(f for f in fmts if f.detection.markers)
        self.bare = tuple(f for f in fmts if f.detection.bare)
        self.bare_by_marker = _grouping((m, f) for f in self.bare for m in dict.fromkeys(f.detection.markers))
        self.claiming_values = _answering(fmts, "claims_value", contract)
        self.claim_needs = {f: n for f in _answering(fmts, "claims_text", contract) if (n := frozenset(f.detection.claim_needs))}
        self.claiming_texts = tuple(self.claim_needs)  # (a row is asked only when the text holds one of its needs)
        self.claimed_by = frozenset().union(*self.claim_needs.values())
        self.reading_untagged = _answering(self.with_markers, "read_untagged", contract)
        # the markers and closers that may stand between a name and its arguments (NAME<token>{...}), by last character
        self.tokens_by_last = _grouping((m[-1], m) for m in dict.fromkeys(
            m for f in fmts for m in (*f.detection.markers, *f.detection.closers) if len(m) > 2))

    def in_name(self, name: str) -> bool:
        """Whether a tool name holds a marker: the rest of another format's call whose separator was lost."""
        return self._any.search(name) is not None

    def marked(self, found_at: Mapping[str, int]) -> Sequence[Any]:
        """The tagged formats (rank order) whose marker or other spelling is in ``found_at``, and those needing none."""
        got = self.tagged_always
        for m in found_at:
            fs = self.tagged_by_marker.get(m)
            if fs is not None and fs is not got:  # (markers naming the same formats share one tuple)
                got = fs if not got else tuple(sorted({*got, *fs}, key=self.rank.__getitem__))
        return got

    def bare_marked(self, found_at: Mapping[str, int]) -> list[Any]:
        """The untagged formats, in rank order, one of whose markers is among ``found_at``."""
        got = {f: None for m in found_at for f in self.bare_by_marker.get(m, ())}
        return sorted(got, key=self.rank.__getitem__) if len(got) > 1 else list(got)


def _spelt(fmt: Any) -> dict[str, None]:
    """A format's markers and other spellings, once each, in order."""
    return dict.fromkeys((*fmt.detection.markers, *fmt.detection.also_read))


def _grouping(pairs: Iterable[tuple[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """The second items of ``pairs`` grouped by their first, in order."""
    out: dict[str, list[Any]] = {}
    for key, value in pairs:
        out.setdefault(key, []).append(value)
    return {key: tuple(values) for key, values in out.items()}


def _answering(fmts: Sequence[Any], hook: str, contract: type) -> tuple[Any, ...]:
    """The formats whose class overrides ``hook`` of the ``contract`` (whose own answers no)."""
    default = getattr(contract, hook)
    return tuple(f for f in fmts if getattr(type(f), hook) is not default)


def find_markers(text: str, table: MarkerTable) -> dict[str, int]:
    """Where each marker of ``table`` first occurs in ``text``, if it does (those of a character that begins many found
    by one pass of their pattern, a group sharing a prefix only searched for when the prefix occurs)."""
    out: dict[str, int] = {}
    for head, group in table.single:
        if head in text:
            for m in group:
                if (i := text.find(m)) >= 0:
                    out[m] = i
    held = table.held
    for pattern in table.patterns:
        for w in dict.fromkeys(pattern.findall(text)):
            for m in held[w]:
                if m not in out and (i := text.find(m)) >= 0:
                    out[m] = i
    return out
