"""Spellings of the XML parameter grammar (:mod:`refiner.formats.xml_grammar`) that several families share, for the
catalog's rows (:mod:`refiner.formats.catalog`).
"""

from __future__ import annotations

from refiner.formats.xml_grammar import XmlParams  # noqa: F401  (the grammar, imported from here by the deriver)
from refiner.formats.xml_spelling import XmlSpelling


def dsml(bar: str, section: str) -> XmlSpelling:
    """DeepSeek's DSML: ``bar`` is ``<｜DSML｜`` (V3.2, V4) or ``<｜DSML｜ `` (V4.1), ``section`` the block's word."""
    close = "</" + bar[1:]
    return XmlSpelling(
        section_open=f"{bar}{section}>", section_close=f"{close}{section}>",
        call_open=f"{bar}invoke ", call_close=f"{close}invoke>", name_at="attr",
        key_open=f"{bar}parameter ", value_close=f"{close}parameter>", key_at="attr", typing="attr", type_attr="string",
    )


def invoke(section: str, prefix: str = "", param: str = "parameter") -> XmlSpelling:
    """``<SECTION><PREFIXinvoke name="f"><PREFIXparameter name="k">v</PREFIXparameter></PREFIXinvoke></SECTION>``
    (MiniMax-M2, dots.llm, Muse Glimmer): strings raw, other values JSON."""
    return XmlSpelling(
        section_open=f"<{section}>", section_close=f"</{section}>",
        call_open=f"<{prefix}invoke ", call_close=f"</{prefix}invoke>", name_at="attr",
        key_open=f"<{prefix}{param} ", value_close=f"</{prefix}{param}>", key_at="attr",
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
