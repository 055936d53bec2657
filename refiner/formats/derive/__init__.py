"""A model family's dialect read from its chat template: render known calls, diff, keep one record of what the
family writes (:mod:`~refiner.formats.derive.diff`, with no assumption about tag names, token spellings or line
layout, and with what could not be derived and why), and read it with a grammar's row the record maps onto
(:mod:`~refiner.formats.derive.rows`: it must read the template's own render of the placeholder calls back as those
calls) or with the generic reader of the record (:mod:`refiner.formats.recorded`, for a family no grammar row holds
and no built-in format reads). Anything else is *special*, with why. :func:`install` names the format to use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from refiner.calls import ToolCall
from refiner.formats import base
from refiner.formats.derive.diff import derive_record, placeholder_tools
from refiner.formats.derive.record import ARGS, CONTENT, IDS, NAMES, Record
from refiner.formats.derive.render import ChatTemplate, TemplateFailure, compile_template, load_template
from refiner.formats.derive.rows import CHECKED, EXPECTED, RowPlan, own_grammar, plan_row
from refiner.formats.detect import detect_format
from refiner.formats.recorded import record_format
from refiner.specs import load_tools

# The assistant turn's text in the renders: empty, then some, then none at all (a template may write calls only when
# the content is None, or refuse a turn with no text).
CONTENTS = ("", CONTENT, None)
__all__ = ["Derived", "Record", "TemplateFailure", "derive", "derive_template", "dialect_for", "install"]
log = logging.getLogger(__name__)


@dataclass
class Derived:
    """What derivation found: the ``record`` of the family's literals; ``fmt``, the derived row (a format instance,
    not registered) or the generic reader of the record (``from_record``), or ``None`` when the family is ``special``
    (``why`` says why); ``same_as`` names a built-in row with the same grammar and spelling; ``read_by`` the
    built-in formats that read the template's render of the placeholder calls back exactly, ``writes_as`` those that
    also write them as the template does."""

    where: str
    sha256: str
    record: Record
    plan: RowPlan | None = None
    fmt: base.WireFormat | None = None
    why: str = ""
    same_as: str | None = None
    read_by: list[str] = field(default_factory=list)
    writes_as: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    from_record: bool = False

    @property
    def special(self) -> bool:
        return self.fmt is None

    @property
    def name(self) -> str | None:
        return self.fmt.name if self.fmt is not None else None

    def as_dict(self) -> dict[str, Any]:
        rec = asdict(self.record)
        out: dict[str, Any] = {
            "template": self.where,
            "sha256": self.sha256,
            "result": "special" if self.special else "row",
            "why": self.why,
            "record": {k: v for k, v in rec.items() if k not in ("sections", "missing")},
            "not_derived": list(self.record.missing),
            "renders": dict(self.record.sections),
            "checks": list(self.checks),
            "read_by": list(self.read_by),
            "writes_as": list(self.writes_as),
            "from_record": self.from_record,
        }
        if self.fmt is not None:
            out.update(name=self.fmt.name, example=self.fmt.example, tags=list(self.fmt.tags), same_as=self.same_as,
                       grammar=self.plan.grammar.__name__ if self.plan else "record" if self.from_record
                       else _grammar_name(self.fmt))
        if self.plan is not None:
            out["spelling"] = asdict(self.plan.spelling)
        return out


def _grammar_name(fmt: base.WireFormat) -> str:
    """The grammar a built-in row is a row of (a catalog row's class is its grammar's subclass named after it)."""
    cls = type(fmt)
    return cls.__mro__[1].__name__ if cls.__name__.endswith(f"_{fmt.name}") else cls.__name__


def derive_template(template: ChatTemplate, name: str | None = None) -> Derived:
    sha = hashlib.sha256(template.source.encode("utf-8")).hexdigest()
    name = name or f"derived_{sha[:10]}"
    compiled = compile_template(template)
    tried, failures = [], []
    for content in CONTENTS:  # a template may end a turn with text differently from one without (Seed-OSS)
        try:
            rec = derive_record(template, compiled, content)
        except TemplateFailure as e:
            failures.append(e)
            continue
        out = _with_row(Derived(template.where, sha, rec), name)
        if not out.special:
            break
        tried.append(out)
    else:
        if not tried:
            raise failures[0]
        out = next((t for t in tried if "two" in t.record.sections), tried[0])
    out.read_by, out.writes_as = _read_by(out.record)
    if out.special:
        _one_call_row(out)
    if not out.same_as:
        _own_grammar(out)
    if out.special and not out.read_by:
        _from_record(out, name)
    return out


def _own_grammar(out: Derived) -> None:
    """The built-in row of a grammar no record maps onto (:func:`~refiner.formats.derive.rows.own_grammar`), or of
    any grammar when the record maps onto no row, that writes the template's renders of both pairs of placeholder
    calls exactly as the template does and reads them back: the derived dialect is that row (a call index after the
    name, a type attribute naming each value's type, say, which no record holds)."""
    rec = out.record
    pairs = [(rec.sections.get("two"), list(EXPECTED)), (rec.sections.get("check"), list(CHECKED))]
    if any(text is None or NAMES[1] not in text for text, _ in pairs):
        return
    spaced = []  # rows that write the renders but for whitespace
    for fmt in base.by_rank():
        if not (own_grammar(fmt) or out.special) or fmt.name not in out.read_by:
            continue
        try:
            written = [(fmt.render(calls), text) for text, calls in pairs]
            if not all(fmt.parse_strict(text) == calls for text, calls in pairs):
                continue
        except (base.RenderError, base.FormatError):
            continue
        if not all(mine in (text, _less_ids(rec, text)) for mine, text in written):
            if all("".join(mine.split()) == "".join(text.split()) for mine, text in written):
                spaced.append(fmt.name)
            continue
        out.same_as = fmt.name
        own = ", a grammar of its own," if own_grammar(fmt) else ""
        out.checks.append(f"{fmt.name}{own} writes the template's renders of both pairs of calls exactly and reads "
                          "them back")
        if out.special:
            out.fmt, out.why = fmt, ""
        return
    if spaced and out.special:
        out.why = (f"{', '.join(spaced)}, a grammar of its own, reads the template's renders back and writes them "
                   f"but for whitespace; {out.why}")


def _one_call(rec: Record) -> str | None:
    """The render of one call, when the template writes one call per turn (it refuses two, or writes only the
    first)."""
    text, two = rec.sections.get("one"), rec.sections.get("two")
    return text if text is not None and NAMES[0] in text and NAMES[1] not in (two or "") else None


def _one_call_row(out: Derived) -> None:
    """For a template that writes one call per turn: the first built-in row, in rank order, that writes the
    template's render of one call exactly (or followed by what the row writes between calls: a message's end) and
    reads it back is the derived dialect; what separates calls is then the row's."""
    text = _one_call(out.record)
    if text is None:
        return
    call = list(EXPECTED[:1])
    for fmt in base.by_rank():
        if fmt.name not in out.read_by:
            continue
        try:
            mine, two = fmt.render(call), fmt.render(call * 2)
        except base.RenderError:
            continue
        between = two[len(mine) : len(two) - len(mine)] if two.startswith(mine) and two.endswith(mine) else None
        if text == mine:
            how = "exactly"
        elif between and text == mine + between:
            how = f"and the {between!r} it writes between calls after it"
        else:
            continue
        out.fmt, out.same_as, out.why = fmt, fmt.name, ""
        out.checks.append(f"{fmt.name} writes the template's render of one call, {how}, and reads it back (the "
                          "template writes one call per turn: what separates calls is the row's)")
        return
    if out.read_by:
        out.why = (f"{out.why}; {', '.join(out.read_by)} read the template's render of one call back but write it "
                   "otherwise")


def _with_row(out: Derived, name: str) -> Derived:
    """``out`` with the row its record maps onto, when the row reads the template's render back."""
    plan = plan_row(out.record)
    if isinstance(plan, str):
        out.why = plan
        return out
    fmt = plan.build(name, out.where, out.sha256)
    problem = plan.check(fmt, out.record, out.checks)
    if problem:
        out.why = problem
        return out
    out.plan, out.fmt = plan, fmt
    out.same_as = next((f.name for f in base.all_formats() if plan.same_spelling(f)), None)
    return out


def _less_ids(rec: Record, text: str) -> str:
    """``text`` without the call ids a row may read and write none of: written between the name and the arguments
    (``[CALL_ID]callq0000[ARGS]`` becomes ``[ARGS]``), or as a key of the call object (``, "id": "callq0000"``)."""
    for call_id in IDS:
        if rec.id_position == "json_key" and rec.id_key:
            key, value = re.escape(json.dumps(rec.id_key)), re.escape(json.dumps(call_id))
            text = re.sub(rf'\s*,\s*{key}\s*:\s*{value}|{key}\s*:\s*{value}\s*,\s*', "", text)
        elif rec.id_position == "after_name":
            text = text.replace(rec.name_suffix + call_id + rec.id_suffix, rec.id_suffix)
    return text


def _from_record(out: Derived, name: str) -> None:
    """For a family no grammar row holds and no built-in format reads: the generic reader of its record, when the
    record is complete and reads the template's own renders of the placeholder calls back exactly."""
    rec = out.record
    if not rec.complete:
        return
    try:
        fmt = record_format(rec, name, out.where)
    except (ValueError, base.RenderError) as e:
        rec.missing.append(f"reader: {e}")
        return
    specs = {s.name: s for s in load_tools(placeholder_tools())}  # (to settle values written as raw text)
    for key, which in (("one", (0,)), ("two", (0, 1)), ("check", (1, 2))):
        expected = [ToolCall(NAMES[i], ARGS[i]) for i in which]
        try:
            got = fmt.parse_strict(rec.sections[key])
        except base.FormatError as e:
            rec.missing.append(f"check: the record's reader does not read the template's render {key!r}: {e}")
            return
        got = fmt.retype(got, specs)
        if got != expected:
            rec.missing.append(f"check: the record's reader reads the template's render {key!r} as {got!r}")
            return
        out.checks.append(f"the record's reader reads the template's render {key!r} back exactly")
    out.fmt, out.from_record, out.why = fmt, True, ""


def _read_by(rec: Record) -> tuple[list[str], list[str]]:
    """The built-in formats that read the template's render of the placeholder calls back exactly (hand-written
    modules included; the one the render's own markers name first), and those of them that also write the calls as
    the template does (whitespace aside)."""
    text, calls = rec.sections.get("two", ""), EXPECTED
    if NAMES[1] not in text:  # a template that writes one call per turn: its render of one call
        text, calls = _one_call(rec) or "", EXPECTED[:1]
    if NAMES[0] not in text:
        return [], []
    found = []
    for fmt in base.by_rank():
        try:
            if tuple(fmt.parse_strict(text)) == calls:
                found.append(fmt.name)
        except base.FormatError:
            continue
    detected = detect_format(text)  # the format the text's own markers name goes first
    found.sort(key=lambda n: n != detected)
    squeezed, writes = "".join(text.split()), []
    for name in found:
        try:
            if "".join(base.get(name).render(list(calls)).split()) == squeezed:
                writes.append(name)
        except base.RenderError:
            continue
    return found, writes


def derive(path: str | Path | ChatTemplate, name: str | None = None) -> Derived:
    """Derives the dialect of the chat template at ``path`` (or one already loaded); raises :class:`TemplateFailure`
    (naming the file) when the template cannot be read, compiled or rendered. ``name``: the derived row's name
    (default ``derived_<sha256 prefix>``)."""
    return derive_template(path if isinstance(path, ChatTemplate) else load_template(path), name)


def dialect_for(path: str | Path | ChatTemplate) -> str | None:
    """The registry name that reads and writes the dialect of the chat template at ``path`` (or one already loaded,
    as the vLLM plugin holds it) (:func:`install`), or ``None`` (detection) when it cannot be derived: never raises;
    a template that fails to load or render, or whose family nothing reads, is one log line."""
    try:
        return install(derive(path))
    except (TemplateFailure, ValueError) as e:
        where = path.where if isinstance(path, ChatTemplate) else path
        log.warning("chat template %s: no dialect derived, the format is detected per request (%s)", where, e)
        return None


def install(derived: Derived) -> str:
    """The registry name that reads and writes the derived dialect: the built-in row with the same spelling, else a
    built-in format that reads and writes the template's calls as it does (``writes_as``: a hand-written module,
    with its own repairs), else the derived row or record reader, registered under its name (once; registering it
    again is a no-op); for a special family, the first built-in format that reads the template's calls back
    (``read_by``). Raises ``ValueError`` for a special family no format reads, or a name already registered with
    another spelling or record."""
    if derived.special and not derived.read_by:
        raise ValueError(f"{derived.where}: no row derived ({derived.why}), and no built-in format reads the "
                         "template's calls")
    if derived.special or derived.same_as or derived.writes_as:  # (none of them for a record reader)
        return derived.same_as or (derived.writes_as or derived.read_by)[0]
    name = derived.fmt.name
    if name in base.names():
        known = base.get(name)
        if derived.from_record and getattr(known, "record", None) != getattr(derived.fmt, "record", None):
            raise ValueError(f"wire format {name!r} is already registered with another record")
        if not derived.from_record and not derived.plan.same_spelling(known):
            raise ValueError(f"wire format {name!r} is already registered with another spelling")
        return name
    base.register(type(derived.fmt))
    return name
