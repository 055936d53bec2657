"""One row of the XML parameter grammar (:class:`XmlSpelling`, :class:`Hook`), the spellings several rows share
(:func:`dsml`, :func:`invoke`, :func:`kv`) and the attribute reader its readers share; the grammar is
:mod:`refiner.formats.xml_grammar`, its rows :mod:`refiner.formats.catalog`."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from refiner.formats.family import POLICY

# The JSON types a value typed by name may have (typing "named"), by the type attribute's value.
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "number": (int, float), "integer": (int,), "boolean": (bool,), "null": (type(None),), "array": (list,),
    "object": (dict,),
}
NAME_LINE_CHARS = 400  # how far above its first key a call's start is looked for
TYPE_CHARS = 400  # how far a type element's closing tag is looked for (XmlSpelling.type_open)
_ATTR_NAME = r"[A-Za-z_][\w:.-]*"
_ATTR = re.compile(rf"""({_ATTR_NAME})\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
# (loose: a double-quoted value whose closing quote is lost ends before the next attribute, or at the tag's end)
_LOOSE_ATTR = re.compile(rf"""(?<!\S)({_ATTR_NAME})\s*(?:=\s*|(?=["']))"""
                         rf"""(?:"([^"]*?(?=\s+{_ATTR_NAME}\s*=\s*")|[^"]*(?="|\Z))"?|'([^']*)'|([^\s"'>]+))""")


@dataclass(frozen=True)
class XmlSpelling:
    """One row's spelling of the grammar, its tags exactly as the model writes them. ``name_at``: ``"eq"``
    (``<function=NAME>``), ``"attr"`` (``name="..."``) or ``"text"`` (after ``call_open`` up to ``name_sep``);
    ``key_at``: ``"eq"``, ``"attr"`` or ``"element"`` (``<arg_key>KEY</arg_key>`` then ``value_open``); ``tag_end``:
    what ends an opening tag; ``index_attr``: an attribute render writes after the name, the call's number from 1;
    ``section_per_call``: a section around each call, not all; ``strip_newline``: a newline at each end of a value is
    the template's; ``typing``: ``"json"``, ``"python"``, ``"attr"`` (``type_attr`` is ``"true"``: raw text,
    ``"false"``: JSON) or ``"named"`` (``type_attr`` names the value's type: :data:`JSON_TYPES`, ``string`` or none for
    raw text); ``sep``: what render writes between tags; ``tag_suffix``: a per-checkpoint ``:SUFFIX`` before each ``>``
    (written; any or none read); ``type_open`` / ``type_close``: a type element between a key and its value (read by
    recovery). Reading policies: ``suffix_optional``, the tags are also written plain (detection looks for them so);
    ``cdata``, a value written as ``<![CDATA[...]]>`` is the text inside; ``refused_attr``, a parameter attribute the
    strict reader and the sniff refuse (another row's typing in the same tags)."""

    call_open: str
    call_close: str
    name_at: str = "eq"
    key_open: str = "<parameter="
    value_close: str = "</parameter>"
    key_at: str = "eq"
    tag_end: str = ">"
    name_attr: str = "name"
    key_attr: str = "name"
    index_attr: str = ""
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
    suffix_optional: bool = field(default=False, metadata=POLICY)
    cdata: bool = field(default=False, metadata=POLICY)
    refused_attr: str = field(default="", metadata=POLICY)

    def __post_init__(self) -> None:
        if self.name_at not in ("eq", "attr", "text") or self.key_at not in ("eq", "attr", "element"):
            raise ValueError(f"name_at / key_at not known: {self.name_at!r} / {self.key_at!r}")
        if self.typing not in ("json", "python", "attr", "named") or (self.typing in ("attr", "named")) != bool(
                self.type_attr):
            raise ValueError(f"typing {self.typing!r} with type_attr {self.type_attr!r}")
        if (self.key_at == "element") != bool(self.value_open):
            raise ValueError("value_open is the element key style's (and only its)")
        if bool(self.section_open) != bool(self.section_close):
            raise ValueError("a section has both tags or neither")
        if bool(self.type_open) != bool(self.type_close) or (self.type_open and self.key_at != "element"):
            raise ValueError("a type element has both tags, and only with element keys")
        if self.suffix_optional and not self.tag_suffix:
            raise ValueError("suffix_optional is a suffixed row's")

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
        sep = self.name_sep if self.name_at == "text" and self.name_sep.strip() else ""
        key = (self.key_open, self.key_close, self.value_open) if self.key_at == "element" else (self.key_open,)
        tags = (self.section_open, self.call_open, sep, *key, self.value_close, self.call_close, self.section_close)
        return tuple(t for t in tags if t)


@dataclass(frozen=True)
class Hook:
    """What a row's table cannot say: ``respell(fmt, text, start) -> (text, notes) | None`` (tags written wrong,
    lenient reading only), the :class:`~refiner.formats.base.WireFormat` hooks ``sniff``, ``region_start``,
    ``read_untagged`` and ``answer_parts`` (each taking the format first), and further detection ``closers``."""

    respell: Callable[..., tuple[str, list[str]] | None] | None = None
    sniff: Callable[..., bool] | None = None
    region_start: Callable[..., int] | None = None
    read_untagged: Callable[..., Any] | None = None
    answer_parts: Callable[..., Any] | None = None
    closers: tuple[str, ...] = ()


def name_line(body: str, at: int) -> int:
    """Where a call whose tag was lost starts, for the key tag at ``at``: the key's line, or the line above when the
    key starts its own; ``at`` when that is more than :data:`NAME_LINE_CHARS` before it."""
    line = body.rfind("\n", 0, at) + 1
    if not body[line:at].strip() and line > 0:
        line = body.rfind("\n", 0, line - 1) + 1
    return line if at - line <= NAME_LINE_CHARS else at


_ATTR_LIST = re.compile(rf"\s*(?:{_ATTR.pattern}\s*)*/?\s*")


def attrs_only(raw: str) -> bool:
    """Whether a tag's text is attributes alone, each quote closed (a self-closing ``/`` allowed)."""
    return _ATTR_LIST.fullmatch(raw) is not None


def _attrs(raw: str, loose: bool = False) -> dict[str, str]:
    """The attributes of a tag's text (any quotes or none), XML's character entities decoded; ``loose``: each name
    after a blank or at the start, a quoted value's ``=`` lost too (``key"city"``)."""
    out = {}
    for key, double, single, bare in (_LOOSE_ATTR if loose else _ATTR).findall(raw):
        value = double or single or bare  # (the one that matched: the others are empty)
        out[key] = html.unescape(value) if "&" in value else value
    return out


def dsml(bar: str, section: str) -> XmlSpelling:
    """DeepSeek's DSML: ``bar`` is ``<｜DSML｜`` (V3.2, V4) or ``<｜DSML｜ `` (V4.1), ``section`` the block's word."""
    return invoke(bar[1:] + section, bar[1:], typing="attr", type_attr="string")


def invoke(section: str, prefix: str = "", **more: Any) -> XmlSpelling:
    """``<SECTION><PREFIXinvoke name="f"><PREFIXparameter name="k">v</PREFIXparameter></PREFIXinvoke></SECTION>``
    (MiniMax-M2, dots.llm, Muse Glimmer): strings raw, other values JSON, unless ``more`` fields say otherwise."""
    return XmlSpelling(
        section_open=f"<{section}>", section_close=f"</{section}>",
        call_open=f"<{prefix}invoke ", call_close=f"</{prefix}invoke>", name_at="attr",
        key_open=f"<{prefix}parameter ", value_close=f"</{prefix}parameter>", key_at="attr", **more,
    )


def kv(prefix: str = "", *, section: str = "", name_sep: str = "\n", sep: str = "\n", suffix: str = "") -> XmlSpelling:
    """The key/value tag pairs (GLM's layout): ``<PREFIXtool_call>NAME[NAME_SEP]<PREFIXarg_key>k</PREFIXarg_key>
    <PREFIXarg_value>v</PREFIXarg_value></PREFIXtool_call>``, in a ``section`` when given."""
    return XmlSpelling(
        section_open=f"<{section}>" if section else "", section_close=f"</{section}>" if section else "",
        call_open=f"<{prefix}tool_call>", call_close=f"</{prefix}tool_call>", name_at="text", name_sep=name_sep,
        key_open=f"<{prefix}arg_key>", key_close=f"</{prefix}arg_key>", key_at="element",
        value_open=f"<{prefix}arg_value>", value_close=f"</{prefix}arg_value>", sep=sep, tag_suffix=suffix,
    )
