"""From a derived :class:`~refiner.formats.derive.record.Record` to a row of one of the grammars in :data:`SPELT`
(:func:`plan_row`), or why none holds it; a plan is checked against the template (:meth:`RowPlan.check`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

from refiner.calls import ToolCall
from refiner.formats import base
from refiner.formats.brace_kv import BraceKV, BraceSpelling
from refiner.formats.derive.literals import open_marker
from refiner.formats.derive.record import ARGS, IDS, NAMES, Record
from refiner.formats.family import Family, make_row
from refiner.formats.json_calls import JsonCalls, JsonSpelling
from refiner.formats.named_json import NamedJson, NamedSpelling
from refiner.formats.pythonic_sentinels import SentinelPythonic, Wrapper
from refiner.formats.reasoning import is_markup
from refiner.formats.recorded import DERIVED_RANK
from refiner.formats.text import common_suffix
from refiner.formats.xml_grammar import XmlParams
from refiner.formats.xml_spelling import XmlSpelling

EXPECTED = (ToolCall(NAMES[0], ARGS[0]), ToolCall(NAMES[1], ARGS[1]))
CHECKED = (ToolCall(NAMES[1], ARGS[1]), ToolCall(NAMES[2], ARGS[2]))  # the calls of the render that checks
_ATTR = re.compile(r"""([A-Za-z_][\w:.-]*)\s*=\s*["']([^"']*)["']""")
_TOKENS = re.compile(r"(<[^<>]+>|\[[^\[\]]+\])(?:<[^<>]+>|\[[^\[\]]+\])+")  # two bracketed tokens or more
SPELT = (XmlParams, JsonCalls, NamedJson, BraceKV, SentinelPythonic)


def own_grammar(fmt: base.WireFormat) -> bool:
    """Whether no record maps onto ``fmt``: no spelling, a grammar :func:`plan_row` cannot spell, a call counter
    (Kimi-K2's ``NAME:0``), untagged JSON calls (Llama 3's ``"joined"``) or keys read and dropped (Mistral's ids)."""
    spelling = getattr(fmt, "spelling", None)
    return (spelling is None or not isinstance(fmt, SPELT) or bool(getattr(spelling, "counter", ""))
            or getattr(spelling, "payload", None) == "joined" or bool(getattr(spelling, "dropped", ())))


def policies(spelling: Any) -> dict[str, Any]:
    """A spelling's reading policies: its fields marked ``policy`` (no chat template says them)."""
    if not is_dataclass(spelling):
        return {}
    return {f.name: getattr(spelling, f.name) for f in fields(spelling) if f.metadata.get("policy")}


def _core(spelling: Any) -> Any:
    """A spelling less what no template says: reading policies, hook, extra argument keys and render's layout."""
    if is_dataclass(spelling):
        spelling = replace(spelling, **{f.name: f.default for f in fields(spelling) if f.name in policies(spelling)})
    if isinstance(spelling, XmlSpelling):
        return replace(spelling, hook="", sep="\n")
    if isinstance(spelling, NamedSpelling):
        return replace(spelling, joiner="")
    if isinstance(spelling, JsonSpelling):
        return replace(spelling, between="\n", arg_keys=spelling.arg_keys[:1])
    return spelling


@dataclass
class RowPlan:
    grammar: type[base.WireFormat]
    spelling: Any
    reasoning: tuple[tuple[str, str], ...] = ()

    def same_spelling(self, fmt: base.WireFormat) -> bool:
        """Whether ``fmt`` is a row of the same grammar spelt the same (:func:`_core`)."""
        return isinstance(fmt, self.grammar) and _core(getattr(fmt, "spelling", None)) == _core(self.spelling)

    def build(self, name: str, where: str, sha: str) -> base.WireFormat:
        fam = Family(name=name, description=f"derived from the chat template {where}",
                     sources=(f"{where} (sha256 {sha})",), **({"reasoning": self.reasoning} if self.reasoning else {}))
        return make_row(self.grammar, fam, self.spelling, DERIVED_RANK)()

    def check(self, fmt: base.WireFormat, rec: Record, notes: list[str]) -> str:
        """Why the row does not read the template's render back (``""``: it does); what was checked: ``notes``."""
        text = rec.sections["two"]
        try:
            got = fmt.parse_strict(text)
        except base.FormatError as e:
            return f"the derived row does not read the template's own render of two calls: {e}"
        one = "" if getattr(self.grammar, "pythonic", False) else rec.sections.get("one", "")
        # the container types the template writes as Python literals (Jinja's | string)
        as_text = {t for t, k in (("list", "kq_items"), ("dict", "kq_info")) if repr(ARGS[0][k]) in one}
        expected = [ToolCall(c.name, {k: repr(v) if type(v).__name__ in as_text else v for k, v in c.arguments.items()})
                    for c in EXPECTED]  # (values of the as_text types as the template writes them)
        if got != expected:
            return f"the derived row reads the template's render of two calls as {got!r}"
        if as_text:
            notes.append(f"the template writes {' and '.join(sorted(as_text))} values as Python literals (Jinja's "
                         "| string: ['vq_item', 2]): the row reads them as text, as written")
        notes.append("reads the template's render of two calls (five typed arguments, then one) back"
                     + (" (those values as text)" if as_text else " exactly"))
        mine = fmt.render(list(EXPECTED))
        if tuple(fmt.parse_strict(mine)) != EXPECTED:
            return "the derived row does not read its own render back"
        notes.append("reads its own render of those calls back exactly")
        if "".join(mine.split()) == "".join(text.split()):
            notes.append("renders those calls as the template does (whitespace aside)")
        return ""


def _opener(text: str) -> str:
    """The marker that opens a section or call: the last run of ``text`` without whitespace."""
    return (text.split() or [""])[-1]


def _plain_opener(text: str) -> str:
    """The opener of a JSON section or call: :func:`_opener`, or, when that is no markup (a code fence, a word), all
    of ``text`` from its first non-space character, with the line end after it."""
    run = _opener(text)
    if not run or is_markup(run):
        return run
    return text.strip() + ("\n" if text[len(text.rstrip()):].startswith("\n") else "")


def _closer(text: str) -> str:
    """The marker that closes a section or call: the first run of ``text`` without whitespace."""
    return (text.split() or [""])[0]


def _section_closer(text: str) -> str:
    """The marker that closes the section: :func:`_closer`, or the first of tokens written back to back."""
    run = _closer(text)
    return run if _TOKENS.fullmatch(run) is None else _TOKENS.match(run).group(1)


def plan_row(rec: Record) -> RowPlan | str:
    """The row for ``rec``, or why there is none."""
    if not rec.complete:
        return "; ".join(rec.missing) or "no shape found"
    if rec.id_position == "after_name":
        return "the call id is written between the name and the arguments: no grammar's row reads it there"
    if rec.wrapper:
        return (f"each call object sits under {rec.wrapper!r} of an outer object: the JSON-calls grammar reads call "
                "objects at one level")
    if rec.shape == "pairs" and rec.quote_open:
        plan = _brace_plan(rec)
    elif rec.shape == "pairs":  # Python calls (NAME(key=value, ...), strings quoted), else XML
        python = _layout(rec) == ("(", "", "=", ",", "", ")") and rec.strings in ("python", "json")
        plan = _pythonic_plan(rec) if python else _xml_plan(rec)
    elif rec.shape in ("json_object", "json_list"):
        plan = _json_plan(rec)
    else:
        plan = _named_plan(rec)
    start, end, two = rec.reasoning_start.strip(), rec.reasoning_end.strip(), rec.sections["two"]
    # (an end written after a call in a turn with no reasoning is not reasoning's end)
    if isinstance(plan, RowPlan) and start and end and end not in two[two.find(NAMES[0]):]:
        plan.reasoning = ((start, end),)
    return plan


def _brace_plan(rec: Record) -> RowPlan | str:
    """The brace grammar's row: ``OPEN KEYWORD NAME{key:value,...} CLOSE``, strings between a quote token."""
    opener = rec.opener.strip()
    j = max(opener.rfind(">"), opener.rfind("]"))
    call_open, keyword = _opener(opener[: j + 1]), opener[j + 1 :]
    if _layout(rec) != ("{", "", ":", ",", "", "}") or rec.quote_open != rec.quote_close or not call_open:
        return (f"a quote token {rec.quote_open!r} in a layout the brace grammar does not spell (it reads "
                "OPEN call:NAME{key:value,...} CLOSE)")
    if rec.literals == "python":
        return "values other than strings written as Python literals: the brace grammar reads JSON literals"
    return RowPlan(BraceKV, BraceSpelling(call_open, rec.call_end.strip()[1:].strip(), rec.quote_open, keyword))


def _layout(rec: Record) -> tuple[str, ...]:
    """A ``pairs`` record's punctuation, spaces aside, around names, keys and values."""
    return (rec.name_suffix.strip(), rec.key_prefix.strip(), rec.key_suffix.strip(), rec.arg_sep.strip(),
            rec.value_suffix.strip(), rec.call_end.strip()[:1])


def _pythonic_plan(rec: Record) -> RowPlan | str:
    """The pythonic grammar's row: Python calls in one list, or one per line, between two markers."""
    if rec.call_start.strip() or rec.call_end.strip() != ")":
        return f"a Python call between markers of its own ({rec.call_start!r} / {rec.call_end!r})"
    ss, se, sep = rec.section_start.strip(), rec.section_end.strip(), rec.call_sep.strip()
    if ss.endswith("[") and se.startswith("]") and sep == ",":
        opened, closed, lines = _opener(ss[:-1]), _section_closer(se[1:]), False
    elif not sep and "\n" in rec.call_sep:
        opened, closed, lines = _opener(ss), _section_closer(se), True
    else:
        return f"Python calls apart by {rec.call_sep!r} between {ss!r} and {se!r}: neither one list nor one per line"
    if not (opened and closed):
        return f"Python calls with no marker before or after them ({opened!r} / {closed!r}): an untagged format"
    return RowPlan(SentinelPythonic, Wrapper(opened, closed, lines=lines))


def _named_plan(rec: Record) -> RowPlan | str:
    """A name, then the arguments as one JSON object, between tokens: the named-JSON grammar's row."""
    call_start = rec.opener[: open_marker(rec.opener)]  # (less a marker left open before the name)
    if not _opener(call_start):  # the name right after a marker left open (<function=NAME>): it opens the call
        call_start = rec.opener
    section_start, call_sep, id_close = rec.section_start, rec.call_sep, ""
    if rec.id_position == "before_name":  # the id right after a call token, closed by a token the name follows
        ss, sep = section_start.removesuffix(IDS[0]), call_sep.removesuffix(IDS[1])
        if ss == section_start or sep == call_sep or not call_start.strip():
            return "the call id is written before the name, not right after a call token and before a token of its own"
        if not (token := _opener(common_suffix(ss, sep))):
            return "the call id before the name follows no call token the calls share"
        section_start, call_sep = ss[: len(ss) - len(token)], sep[: len(sep) - len(token)]
        call_start, id_close = token, _opener(call_start)
    ss, se = _opener(section_start), _section_closer(rec.section_end)
    cs, ce = _opener(call_start), _closer(rec.call_end)
    if bool(ss) != bool(se):
        return f"a section opened by {ss!r} and closed by {se!r}"
    if not cs:
        return "the name follows no marker of its own"
    if not rec.name_suffix:
        return "nothing between the name and its arguments"
    i, j = call_start.rfind(cs), rec.call_end.find(ce) + len(ce)
    close, joiner = (rec.call_end[:j], rec.call_end[j:] + call_sep + call_start[:i]) if ce else ("", call_sep)
    marker = not ss and cs[:1] in "<["  # with no section, a tag opens a call wherever it is written
    # the name a plain answer is addressed to when the template writes it as a call (Functionary's >>>all)
    _, opened, word = rec.turn_start.rpartition(cs)
    head = word.removesuffix(rec.name_suffix)
    recipients = (head,) if opened and head != word and head.isidentifier() else ()
    return RowPlan(NamedJson, NamedSpelling(ss or None, se or None, cs, rec.name_suffix, close, joiner=joiner,
                                            text_recipients=recipients, id_close=id_close,
                                            call_marker=marker))


def _json_plan(rec: Record) -> RowPlan | str:
    if rec.args_as_text:
        return "the arguments are written as a JSON string inside the call object"
    keys = {"keyed": True} if rec.keyed else {"name_key": rec.name_key, "arg_keys": (rec.args_key,),
                                              "id_key": rec.id_key or None}
    ss, se = _plain_opener(rec.section_start), _section_closer(rec.section_end)
    cs, ce = _plain_opener(rec.call_start), _closer(rec.call_end)
    if rec.shape == "json_list":
        if not ss:
            return "the calls are a JSON list with no marker before it (an untagged format)"
        return RowPlan(JsonCalls, JsonSpelling(ss, se or None, "list", **keys))
    if cs and ss:
        return "calls are tagged one by one inside a tagged section: the JSON-calls grammar has one level of tags"
    if cs:
        if not ce:
            return "each call object follows a marker with no closing marker"
        (before, _, lead), (trail, _, after) = rec.call_start.rpartition(cs), rec.call_end.partition(ce)
        return RowPlan(JsonCalls, JsonSpelling(cs, ce, "object", lead=lead, trail=trail,
                                               between=after + rec.call_sep + before, **keys))
    if ss and se and "\n" in rec.call_end + rec.call_sep:  # (the newline after each call object is its closer)
        return RowPlan(JsonCalls, JsonSpelling(ss, se, "lines", **keys))
    return "the call objects carry no marker of their own (an untagged format)"


def _xml_plan(rec: Record) -> RowPlan | str:
    if rec.strings != "raw":
        return "string values are written quoted (JSON strings), not as raw text between tags"
    j = open_marker(rec.opener)  # the call marker, then a marker left open before the name (<invoke name=")
    call_start, name_prefix = rec.opener[:j], rec.opener[j:]
    np, ns = name_prefix.strip(), rec.name_suffix
    cs, ce = _opener(call_start), rec.call_end.strip()
    placed = _in_tag(np, ns, "tool name")
    if isinstance(placed, str):
        return placed
    if placed:
        close = "</" + placed[1][1:].rstrip("= ") + ">"
        if not ce.startswith(close):
            return f"the call element is not closed by {close} ({ce!r})"
        kw: dict[str, Any] = {"name_at": placed[0], "call_open": placed[1], "call_close": close}
        ce = ce[len(close) :].strip()
        if cs or ce:  # (a message of its own per call: its section holds the message's calls, one as the template writes)
            kw.update(section_open=cs, section_close=ce, section_per_call=not rec.call_header)
    elif not np and cs:
        kw = {"name_at": "text", "call_open": cs, "call_close": ce, "name_sep": ns.strip() or "\n"}
    else:
        return f"the tool name is written after {name_prefix!r}: no tag of the XML grammar holds it"
    ss, se = _opener(rec.section_start), _section_closer(rec.section_end)
    if ss or se:
        if kw.get("section_per_call") or not (ss and se):
            return f"section markers {ss!r} / {se!r} around per-call markers"
        kw.update(section_open=ss, section_close=se)
    key = _key_spelling(rec)
    if isinstance(key, str):
        return key
    if not rec.value_suffix.strip():
        return "a value is not closed by a tag"
    layout = rec.arg_sep + rec.value_suffix + rec.key_prefix + rec.call_sep + rec.name_suffix
    kw.update(key, value_close=rec.value_suffix.strip(), sep="\n" if "\n" in layout else "",
              strip_newline=rec.key_suffix.endswith("\n") and rec.value_suffix.startswith("\n"))
    kw.setdefault("typing", "python" if rec.literals == "python" else "json")
    kw.update(_tag_suffix(kw))
    try:
        return RowPlan(XmlParams, XmlSpelling(**kw))
    except ValueError as e:
        return f"the markers make no XML-grammar spelling: {e}"


# The tags of an XML spelling, and one of them with a suffix before its ">" (<tool_call:opensource>).
_TAG_FIELDS = ("section_open", "section_close", "call_open", "call_close", "name_sep", "key_open", "key_close",
               "value_open", "value_close")
_SUFFIXED_TAG = re.compile(r"(</?[^\s<>:=\"']+)(:[^\s<>:=\"']{1,64})>")


def _tag_suffix(kw: dict[str, Any]) -> dict[str, Any]:
    """The spelling's tags less a suffix every one carries before its ``>`` (``<tool_call:opensource>``), with that
    suffix as ``tag_suffix``; nothing when the tags do not all carry one suffix."""
    found = {f: _SUFFIXED_TAG.fullmatch(kw[f]) for f in _TAG_FIELDS if kw.get(f, "").strip()}
    suffixes = {m.group(2) for m in found.values() if m is not None}
    if len(found) < 2 or None in found.values() or len(suffixes) != 1:
        return {}
    return {**{f: m.group(1) + ">" for f, m in found.items()}, "tag_suffix": suffixes.pop()}


def _in_tag(prefix: str, suffix: str, what: str, typed: bool = False) -> tuple[str, str] | str | None:
    """The tag that holds the ``what`` written between ``prefix`` and ``suffix``: ``("attr", the tag's opening)`` when
    it is the tag's last attribute ``name="..."`` (``typed``: a typing attribute may follow), ``("eq", prefix)`` when
    it follows the tag's ``=``; ``None`` when neither; else why no XML-grammar tag holds it."""
    if prefix.endswith(('="', "='")):
        attr = prefix.split()[-1].split("=")[0] if len(prefix.split()) > 1 else ""
        if attr != "name":
            return f"the {what} is in the attribute {attr!r}: the XML grammar reads it from name=\"...\""
        if not typed and not suffix.startswith(prefix[-1] + ">"):
            return f"the {what} attribute is not the last one of its tag ({suffix!r} follows it)"
        return "attr", prefix.split()[0] + " "
    if prefix.endswith("="):
        return ("eq", prefix) if suffix.startswith(">") else f"the {what} is not closed by '>' ({suffix!r} follows it)"
    return None


def _key_spelling(rec: Record) -> dict[str, Any] | str:
    kp, ks, typed = rec.key_prefix.strip(), rec.key_suffix, bool(rec.key_suffix_typed)
    placed = _in_tag(kp, ks, "argument key", typed)
    if isinstance(placed, str):
        return placed
    if typed:
        attrs = _ATTR.findall(ks)
        if not placed or placed[0] != "attr":
            return "a type marker between key and value that is not an attribute of the key's tag"
        if len(attrs) != 1 or attrs[0][1] != "true":
            return f"a typing attribute the XML grammar does not read ({ks!r})"
        return {"key_at": "attr", "key_open": placed[1], "typing": "attr", "type_attr": attrs[0][0]}
    if placed:
        return {"key_at": placed[0], "key_open": placed[1]}
    if kp.startswith("<") and kp.endswith(">"):
        i = ks.find(">")
        key_close, value_open = ks[: i + 1].strip(), ks[i + 1 :].strip()
        if i < 0 or not key_close or not value_open:
            return f"a key element {kp!r} not followed by a closing tag and a value tag ({ks!r})"
        return {"key_at": "element", "key_open": kp, "key_close": key_close, "value_open": value_open}
    return f"the argument key is written after {rec.key_prefix!r}: no tag of the XML grammar holds it"
