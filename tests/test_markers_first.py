"""The marker search gives the first place of every marker: markers one pattern (a trie) finds, written where a longer
one begins, inside another's match or running past its end; and the registry's table follows the registry."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refiner.formats import base
from refiner.formats.base import Detection, WireFormat, marker_positions, marker_table
from refiner.formats.markers import TRIE_MARKERS, MarkerTable, find_markers

# markers of one first character (enough for a pattern): prefixes and extensions of each other, and one that begins
# at another's last character ("<b>" in "<a<b>", where the pattern matches "<a<"); and two of other characters
ANGLED = ("<a", "<ab", "<abc>", "<abcd", "<a<", "<b>", "<b>c", "<c", "<ca>", "<cab>")
OTHERS = ("a>>", "cb")


class _Row(WireFormat):
    name = "row"
    description = "a test row"
    example = "<a"
    detection = Detection()


def _fmt(name: str, markers: tuple[str, ...], closers: tuple[str, ...] = (), rank: int = 0) -> WireFormat:
    cls = type(f"_{name}", (_Row,), {"name": name, "detection": Detection(rank=rank, markers=markers,
                                                                           closers=closers)})
    return cls()


TABLE = MarkerTable([_fmt("one", ANGLED[:5], OTHERS), _fmt("two", ANGLED[5:])], WireFormat)


def _first_places(text: str, markers) -> dict[str, int]:
    return {m: text.find(m) for m in markers if m in text}


def test_the_angled_markers_are_found_by_one_pattern():
    assert len(ANGLED) >= TRIE_MARKERS and len(TABLE.patterns) == 1
    assert TABLE.known == frozenset(ANGLED + OTHERS)


@pytest.mark.parametrize("text", [
    "<a <abc>",  # a marker that extends another, written after it
    "x<abc> <a<",  # the longer first: the shorter is where the longer begins
    "<abcd<abc>",  # an extension written first, the marker it extends after it
    "<a<b>c",  # a marker beginning inside another's match and running past its end
    "<ca<cab>",  # one that begins where a longer one would, cut short, then the longer
    "<<<<<a<<<<b>",
])
def test_each_marker_is_found_at_its_first_place(text):
    assert find_markers(text, TABLE) == _first_places(text, TABLE.known)


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet="<abcd> ", max_size=60))
def test_any_text_of_the_markers_characters_gives_every_first_place(text):
    assert find_markers(text, TABLE) == _first_places(text, TABLE.known)


def test_registered_markers_that_extend_others_are_found_after_them():
    """Every pair of registered markers one of which begins with the other, written short one first and the other
    way round, and each marker written at a match's last character (inside a longer match, running past it)."""
    known = sorted(marker_table().known)
    pairs = [(m, n) for m in known for n in known if n != m and n.startswith(m)]
    assert pairs  # (the registry has such markers: the case is real)
    for m, n in pairs:
        for text in (f"{m} {n}", f"{n} {m}", f"{m}{n}", f"x{n}{m}"):
            assert marker_positions(text) == _first_places(text, known), text
    for w in known:
        for n in known:
            text = w + n[1:] if n[:1] == w[-1:] else None  # (n begins at w's last character)
            if text is not None:
                assert marker_positions(text) == _first_places(text, known), text


def test_the_table_follows_the_registry(monkeypatch):
    table = marker_table()
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    assert marker_table() is table  # (a dict of the same formats ranks them the same)
    last = next(reversed(base._REGISTRY))
    del base._REGISTRY[last]
    base._REGISTRY["test_row"] = _fmt("test_row", ("<|test row marker|>",), rank=10_000)
    swapped = marker_table()  # (as many formats as before, another last)
    assert swapped is not table and "<|test row marker|>" in swapped.known
    assert marker_positions("a <|test row marker|>") == {"<|test row marker|>": 2}
