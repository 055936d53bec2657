"""What one row of the XML parameter grammar says (:class:`XmlSpelling`), the hooks a row's table cannot hold
(:class:`Hook`), and the tag-level helpers the grammar's readers share: attributes, per-checkpoint tag
suffixes, the first of several tags. The grammar itself is :mod:`refiner.formats.xml_grammar`; its rows are
:mod:`refiner.formats.catalog`.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

DETECT_CHARS = 2_000  # of text after a marker read to tell a row from others sharing it
NAME_LINE_CHARS = 400  # how far above its first key a call's start is looked for
TYPE_CHARS = 400  # how far a type element's closing tag is looked for (XmlSpelling.type_open)
# A tool name as base.NAME_PATTERN reads it (no whitespace, angle brackets, braces or quotes), but with single spaces
# between words: for rows whose name is the text after the call tag (GLM).
SPACED_NAME_PATTERN = r"[^\s<>{}\"']+(?: [^\s<>{}\"']+)*"
_ATTR = re.compile(r"""([A-Za-z_][\w:.-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
# The attributes as rendering writes them (a name, then at most one more): read in one match.
_SIMPLE_ATTRS = re.compile(r"""\s*name="([^"&]*)"(?:\s+([A-Za-z_][\w:.-]*)="([^"&]*)")?\s*""")


@dataclass(frozen=True)
class XmlSpelling:
    """One row's spelling of the grammar (:mod:`refiner.formats.xml_grammar`). Tag literals are written exactly as
    the model writes them (special tokens as text).

    - ``call_open`` / ``call_close``: a call's tags; where the name sits is ``name_at``: ``"eq"`` (``<function=`` NAME
      ``>``), ``"attr"`` (``<invoke`` attributes ``>``, the name in ``name="..."``) or ``"text"`` (the text after
      ``call_open`` up to ``name_sep``, a key or the call's end: GLM's ``<tool_call>NAME\\n``, Hunyuan's
      ``<tool_call>NAME<tool_sep>``);
    - ``key_open`` / ``key_close`` and ``key_at``: ``"eq"`` (``<parameter=`` KEY ``>``, ``key_close`` unused),
      ``"attr"`` (``<parameter`` attributes ``>``, the key in ``name="..."``, a type in ``type_attr``) or
      ``"element"`` (``<arg_key>`` KEY ``</arg_key>``, then ``value_open``);
    - ``value_open`` (``"element"`` only) / ``value_close``;
    - ``section_open`` / ``section_close``: tags around the calls (``""``: none); ``section_per_call``: one section
      per call (Qwen3-Coder's ``<tool_call>``), else one around all of them (MiniMax-M2's ``<minimax:tool_call>``);
    - ``strip_newline``: one newline at each end of a value is the template's, not the value's;
    - ``typing``: ``"json"``, ``"python"`` or ``"attr"`` (see :mod:`refiner.formats.xml_grammar`), ``type_attr``
      the attribute;
    - ``sep``: what ``render`` writes between tags (the template's layout); ``tag_suffix``: a per-checkpoint suffix
      written before every tag's ``>`` (Hunyuan HY v4's ``:6124c78e``; any ``:SUFFIX`` is read);
    - ``hook``: the row's :class:`Hook` (``None``: none);
    - ``type_open`` / ``type_close`` (``"element"`` keys only): a type element the model may write between a key and
      its value (K2-Horizon's ``xml_typed`` layout, ``<ifm|arg_type>string</ifm|arg_type>``); not strictly valid
      in the row, read by recovery: ``string`` is the text as written, ``any`` the row's typing, another type
      JSON."""

    call_open: str
    call_close: str
    name_at: str = "eq"
    key_open: str = "<parameter="
    value_close: str = "</parameter>"
    key_at: str = "eq"
    key_close: str = ">"
    value_open: str = ""
    section_open: str = ""
    section_close: str = ""
    section_per_call: bool = False
    name_sep: str = "\n"
    strip_newline: bool = False
    typing: str = "json"
    type_attr: str = ""
    sep: str = "\n"
    tag_suffix: str = ""
    hook: Hook | None = None
    type_open: str = ""
    type_close: str = ""

    def __post_init__(self) -> None:
        if self.name_at not in ("eq", "attr", "text") or self.key_at not in ("eq", "attr", "element"):
            raise ValueError(f"name_at / key_at not known: {self.name_at!r} / {self.key_at!r}")
        if self.typing not in ("json", "python", "attr") or (self.typing == "attr") != bool(self.type_attr):
            raise ValueError(f"typing {self.typing!r} with type_attr {self.type_attr!r}")
        if (self.key_at == "element") != bool(self.value_open):
            raise ValueError("value_open is the element key style's (and only its)")
        if bool(self.section_open) != bool(self.section_close):
            raise ValueError("a section has both tags or neither")
        if bool(self.type_open) != bool(self.type_close) or (self.type_open and self.key_at != "element"):
            raise ValueError("a type element has both tags, and only with element keys")

    @property
    def python_literals(self) -> bool:
        return self.typing == "python"

    @property
    def value_tags(self) -> tuple[str, str]:
        """The tags a raw string value may not hold (it is then written as a JSON string literal)."""
        return (self.value_open if self.key_at == "element" else self.key_open), self.value_close

    @property
    def first_open(self) -> str:
        return self.section_open or self.call_open

    def tags(self) -> tuple[str, ...]:
        tags = [self.section_open, self.call_open, self.key_open]
        if self.key_at == "element":
            tags += [self.key_close, self.value_open]
        tags += [self.value_close, self.call_close, self.section_close]
        if self.name_at == "text" and self.name_sep.strip():
            tags.insert(2, self.name_sep)
        return tuple(t for t in tags if t)


@dataclass(frozen=True)
class Hook:
    """What a row's table cannot say, in one place (its spelling's ``hook``). Every field is optional.

    ``respell(fmt, text, start) -> (text, notes) | None``: the text with tags written wrong read as the grammar's
    (lenient reading only); ``sniff(fmt, body, at) -> bool``: replaces the grammar's detection check;
    ``region_start(fmt, body, at) -> int`` and ``read_untagged(fmt, text, start, offered)``: see
    :class:`~refiner.formats.base.WireFormat`."""

    respell: Callable[..., tuple[str, list[str]] | None] | None = None
    sniff: Callable[..., bool] | None = None
    region_start: Callable[..., int] | None = None
    read_untagged: Callable[..., Any] | None = None


def _attrs(raw: str) -> dict[str, str]:
    """The attributes of a tag's text (``name="f" string="true"``; single quotes and bare values read too), XML's
    character entities decoded (``render`` writes a name holding ``"``, ``<``, ``>``, ``&`` or a newline with them)."""
    m = _SIMPLE_ATTRS.fullmatch(raw)
    if m is not None:
        if m.group(2) is None:
            return {"name": m.group(1)}
        return {"name": m.group(1), m.group(2): m.group(3)}
    out = {}
    for m in _ATTR.finditer(raw):
        value = next(g for g in m.groups()[1:] if g is not None)
        out[m.group(1)] = html.unescape(value) if "&" in value else value
    return out


def _attr_value(value: str) -> str:
    """An attribute value as ``render`` writes it: XML's entities where the value holds a character the tag cannot
    (quotes, brackets, ampersands, line breaks)."""
    if not any(c in value for c in '"<>&\n\r'):
        return value
    return (value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", "&#10;").replace("\r", "&#13;"))


_NO_HOOK = Hook()


def _suffixed_words(tags: tuple[str, ...]) -> list[str]:
    """The words of ``tags`` (and of the reasoning block's ``<think>``) that a row with ``tag_suffix`` suffixes."""
    return sorted({t[1:-1].lstrip("/") for t in tags if t.endswith(">")} | {"think"})


@functools.lru_cache(maxsize=64)
def _suffix_pattern(tags: tuple[str, ...]) -> re.Pattern:
    """A tag of ``tags`` (and the reasoning block's ``<think>``) with a ``:SUFFIX`` before its ``>``, or a text that
    ends inside such a tag's suffix (cut short: ``</arg_value:61``)."""
    alts = "|".join(re.escape(w) for w in _suffixed_words(tags))
    return re.compile(r"(</?(?:" + alts + r")):(?:[^\s<>]{1,64}>|[^\s<>]{0,64}\Z)")


def _unsuffix(tags: tuple[str, ...], text: str) -> str:
    """``text`` with the suffix dropped from every tag of ``tags`` (:func:`_suffix_pattern`): the whole tags by a
    template (no Python call per tag), then a tag the text ends inside."""
    whole, cut = _suffix_parts(tags)
    text = whole.sub("", text)
    m = cut.search(text, max(len(text) - 160, 0))
    return text if m is None else text[: m.start()] + _unsuffixed(m)


@functools.lru_cache(maxsize=64)
def _suffix_parts(tags: tuple[str, ...]) -> tuple[re.Pattern, re.Pattern]:
    """:func:`_suffix_pattern`'s two cases apart: a whole tag's suffix alone (found from its ``:``, replaced by
    nothing: the substitution then runs at C speed), and a text that ends inside a tag's suffix."""
    head = _suffix_pattern(tags).pattern.split(":(?:", 1)[0]
    behind = "|".join(f"(?<={re.escape(o + w + ':')})" for w in _suffixed_words(tags) for o in ("<", "</"))
    return re.compile(r":(?:" + behind + r")[^\s<>]{1,64}(?=>)"), re.compile(head + r":[^\s<>]{0,64}\Z")


def _unsuffixed(m: re.Match) -> str:
    """A tag matched by :func:`_suffix_pattern` without its suffix; a text cut inside the suffix ends inside the tag
    (``</arg_value``: a cut, as the same text without a suffix reads), not after a tag read whole."""
    return m.group(1) + (">" if m.group(0).endswith(">") else "")


def _first(text: str, tags: Sequence[str], pos: int) -> int:
    best = len(text)
    for t in tags:
        if t:
            j = text.find(t, pos, best)
            if j >= 0:
                best = j
    return best
