"""A family's dialect read from its chat template: the record of what it writes (:mod:`~refiner.formats.derive.diff`),
read by the grammar row it maps onto (:mod:`~refiner.formats.derive.rows`) or by the record's generic reader
(:mod:`refiner.formats.recorded`); else *special*, with why. :func:`install` names the format to use."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from refiner.formats import base
from refiner.formats.derive.diff import derive_record, placeholder_tools
from refiner.formats.derive.record import CONTENT, IDS, NAMES, Record
from refiner.formats.derive.render import ChatTemplate, TemplateFailure, compile_template, load_template
from refiner.formats.derive.rows import CHECKED, EXPECTED, RowPlan, own_grammar, plan_row
from refiner.formats.detect import detect_format
from refiner.formats.recorded import record_format
from refiner.specs import load_tools

# The assistant turn's text in the renders: empty, then some, then none at all.
CONTENTS = ("", CONTENT, None)
__all__ = ["Derived", "Record", "TemplateFailure", "derive", "dialect_for", "install"]
log = logging.getLogger(__name__)


@dataclass
class Derived:
    """What derivation found: ``fmt``, the derived row or record reader (``from_record``), ``None`` when ``special``
    (``why``); ``same_as``, a built-in row spelt the same; ``read_by`` / ``writes_as``, the built-in formats that read
    the template's render of the placeholder calls back exactly / and also write it as the template does."""

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
            "template": self.where, "sha256": self.sha256, "result": "special" if self.special else "row",
            "why": self.why, "record": {k: v for k, v in rec.items() if k not in ("sections", "missing")},
            "not_derived": list(self.record.missing), "renders": dict(self.record.sections),
            "checks": list(self.checks), "read_by": list(self.read_by), "writes_as": list(self.writes_as),
            "from_record": self.from_record}
        if self.fmt is not None:
            cls = type(self.fmt)  # a row's class is its grammar's subclass named GRAMMAR_NAME
            grammar = cls.__mro__[1] if cls.__name__.endswith(f"_{self.fmt.name}") else cls
            out.update(name=self.fmt.name, example=self.fmt.example, tags=list(self.fmt.tags), same_as=self.same_as,
                       grammar="record" if self.from_record else grammar.__name__)
        if self.plan is not None:
            out["spelling"] = asdict(self.plan.spelling)
        return out


def derive(path: str | Path | ChatTemplate, name: str | None = None) -> Derived:
    """The dialect of the chat template at ``path`` (or one loaded); raises :class:`TemplateFailure` when it cannot be
    read, compiled or rendered."""
    template = path if isinstance(path, ChatTemplate) else load_template(path)
    sha = hashlib.sha256(template.source.encode("utf-8")).hexdigest()
    name = name or f"derived_{sha[:10]}"
    compiled = compile_template(template)
    tried, failures = [], []
    for content in CONTENTS:
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
    if not out.same_as:
        _built_in_row(out)
    if out.special and not out.read_by:
        _from_record(out, name)
    return out


def _built_in_row(out: Derived) -> None:
    """The dialect is the first built-in row (of a grammar no record maps onto; of any grammar when the record maps onto
    no row) that writes the template's renders and reads them back: of both pairs of placeholder calls exactly, or, for
    a template that writes one call per turn, of one call (alone or followed by what the row writes between calls)."""
    rec, one = out.record, _one_call(out.record)
    two, check = rec.sections.get("two", ""), rec.sections.get("check", "")
    if one is None and (NAMES[1] not in two or NAMES[1] not in check):
        return
    for fmt in [f for f in base.by_rank() if f.name in out.read_by and (out.special or own_grammar(f))]:
        if one is None:  # (read_by: ``two`` is read back)
            written = [(_render(fmt, EXPECTED), two), (_render(fmt, CHECKED), check)]
            if _read(fmt, check) != CHECKED or not all(mine in (text, _less_ids(rec, text)) for mine, text in written):
                continue
            own = ", a grammar of its own," if own_grammar(fmt) else ""
            note = f"{fmt.name}{own} writes the template's renders of both pairs of calls exactly and reads them back"
        else:
            mine, twice = _render(fmt, EXPECTED[:1]), _render(fmt, EXPECTED[:1] * 2)
            if mine is None or twice is None:
                continue
            between = twice[len(mine) : len(twice) - len(mine)] if twice.startswith(mine) and twice.endswith(mine) else ""
            how = ("exactly" if one == mine else f"and the {between!r} it writes between calls after it"
                   if between and one == mine + between else "")
            if not how:
                continue
            note = (f"{fmt.name} writes the template's render of one call, {how}, and reads it back (the template "
                    "writes one call per turn: what separates calls is the row's)")
        out.same_as = fmt.name
        out.checks.append(note)
        if out.special:
            out.fmt, out.why = fmt, ""
        return
    if one is not None and out.read_by:
        out.why = (f"{out.why}; {', '.join(out.read_by)} read the template's render of one call back but write it "
                   "otherwise")


def _one_call(rec: Record) -> str | None:
    """The render of one call, when the template writes one call per turn."""
    text, two = rec.sections.get("one"), rec.sections.get("two")
    return text if text is not None and NAMES[0] in text and NAMES[1] not in (two or "") else None


def _with_row(out: Derived, name: str) -> Derived:
    """``out`` with the row its record maps onto, when the row reads the template's render back."""
    plan = plan_row(out.record)
    if isinstance(plan, str):
        out.why = plan
        return out
    fmt = plan.build(name, out.where, out.sha256)
    out.why = plan.check(fmt, out.record, out.checks)
    if out.why:
        return out
    out.plan, out.fmt = plan, fmt
    out.same_as = next((f.name for f in base.all_formats() if plan.same_spelling(f)), None)
    return out


def _less_ids(rec: Record, text: str) -> str:
    """``text`` without the call ids written after the name or as a key of the call object."""
    for call_id in IDS:
        if rec.id_position == "json_key" and rec.id_key:
            key, value = re.escape(json.dumps(rec.id_key)), re.escape(json.dumps(call_id))
            text = re.sub(rf'\s*,\s*{key}\s*:\s*{value}|{key}\s*:\s*{value}\s*,\s*', "", text)
        elif rec.id_position == "after_name":
            text = text.replace(rec.name_suffix + call_id + rec.id_suffix, rec.id_suffix)
    return text


def _from_record(out: Derived, name: str) -> None:
    """The record's generic reader, when the record is complete and reads the template's renders back exactly."""
    rec = out.record
    if not rec.complete:
        return
    try:
        fmt = record_format(rec, name, out.where)
    except base.RenderError as e:
        rec.missing.append(f"reader: {e}")
        return
    specs = {s.name: s for s in load_tools(placeholder_tools())}  # (to settle values written as raw text)
    for key, expected in (("one", EXPECTED[:1]), ("two", EXPECTED), ("check", CHECKED)):
        try:
            got = fmt.parse_strict(rec.sections[key])
        except base.FormatError as e:
            rec.missing.append(f"check: the record's reader does not read the template's render {key!r}: {e}")
            return
        got = fmt.retype(got, specs)
        if tuple(got) != expected:
            rec.missing.append(f"check: the record's reader reads the template's render {key!r} as {got!r}")
            return
        out.checks.append(f"the record's reader reads the template's render {key!r} back exactly")
    out.fmt, out.from_record, out.why = fmt, True, ""


def _read_by(rec: Record) -> tuple[list[str], list[str]]:
    """``rec``'s :attr:`Derived.read_by` (detected format first) and :attr:`Derived.writes_as` (whitespace aside)."""
    text, calls = rec.sections.get("two", ""), EXPECTED
    if NAMES[1] not in text:
        text, calls = _one_call(rec) or "", EXPECTED[:1]
    found = [fmt.name for fmt in base.by_rank() if _read(fmt, text) == calls]
    detected = detect_format(text)
    found.sort(key=lambda n: n != detected)
    squeezed = "".join(text.split())
    return found, [n for n in found if (mine := _render(base.get(n), calls)) and "".join(mine.split()) == squeezed]


def _read(fmt: base.WireFormat, text: str) -> tuple | None:
    """The calls ``fmt`` reads ``text`` as strictly; ``None`` when it does not read it."""
    try:
        return tuple(fmt.parse_strict(text))
    except base.FormatError:
        return None


def _render(fmt: base.WireFormat, calls: tuple) -> str | None:
    """``fmt``'s render of ``calls``; ``None`` when it cannot write them."""
    try:
        return fmt.render(list(calls))
    except base.RenderError:
        return None


def dialect_for(path: str | Path | ChatTemplate) -> str | None:
    """The registry name for the dialect of the chat template at ``path`` (:func:`install`), or ``None`` (detection,
    one log line) when it cannot be derived. Never raises."""
    try:
        return install(derive(path))
    except (TemplateFailure, ValueError) as e:
        where = path.where if isinstance(path, ChatTemplate) else path
        log.warning("chat template %s: no dialect derived, the format is detected per request (%s)", where, e)
        return None


def install(derived: Derived) -> str:
    """The registry name for the derived dialect: ``same_as``, else ``writes_as[0]``, else the derived format,
    registered once under its name; for a special family, ``read_by[0]``. Raises ``ValueError`` when no format reads
    it, or its name is registered with another spelling or record."""
    if derived.special and not derived.read_by:
        raise ValueError(f"{derived.where}: no row derived ({derived.why}), and no built-in format reads the "
                         "template's calls")
    if derived.special or derived.same_as or derived.writes_as:
        return derived.same_as or (derived.writes_as or derived.read_by)[0]
    name = derived.fmt.name
    if base.known(name):
        known = base.get(name)
        if derived.from_record and getattr(known, "record", None) != getattr(derived.fmt, "record", None):
            raise ValueError(f"wire format {name!r} is already registered with another record")
        if not derived.from_record and not derived.plan.same_spelling(known):
            raise ValueError(f"wire format {name!r} is already registered with another spelling")
        return name
    base.register(type(derived.fmt))
    return name
