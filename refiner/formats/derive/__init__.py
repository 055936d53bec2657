"""A model family's dialect read from its chat template: render known calls, diff, keep the markers, map them onto a
grammar's row.

``derive(path)`` loads the template (:mod:`~refiner.formats.derive.render`: a ``.jinja``, a ``tokenizer_config.json``
or a model folder), renders a few conversations through it in a sandboxed jinja2 environment set up as
``transformers`` sets it, reads the markers from the renders (:mod:`~refiner.formats.derive.analyze`), and maps that
record onto a row of one of the project's grammars (:mod:`~refiner.formats.derive.rows`): the XML-ish parameter
grammar (:mod:`refiner.formats.xml_params`) or the JSON-calls grammar (:mod:`refiner.formats.json_calls`). A row is
built with :func:`refiner.formats.family.make_row` (not registered), then checked against the template itself: it
must read the template's own render of the placeholder calls back as those calls. Anything else is *special*, with
why (a typing the grammar cannot hold, a name carried inside the call id, calls in no shape a grammar reads, ...).

:func:`install` registers a derived row under its name (``Refiner(chat_template=...)`` and ``serve --chat-template``
do, so that the pipeline can name it), or names the built-in row that has the same spelling. ``read_by`` lists the
built-in formats (hand-written modules included) that read the template's render of the placeholder calls back
exactly, ``writes_as`` those that also write them as the template does; :func:`install` prefers a built-in row of
the same spelling, then one of ``writes_as``, then the derived row (for a special family: ``read_by``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refiner.formats import base
from refiner.formats.derive.analyze import CONTENTS, NAMES, Markers, analyze
from refiner.formats.derive.render import ChatTemplate, TemplateFailure, compile_template, load_template
from refiner.formats.derive.rows import EXPECTED, RowPlan, plan_row
from refiner.formats.detect import detect_format

__all__ = ["Derived", "TemplateFailure", "derive", "derive_template", "install"]


@dataclass
class Derived:
    """What derivation found. ``fmt`` is the derived row (a format instance, not registered) or ``None`` when the
    family is ``special`` (``why`` says why); ``same_as`` names a built-in row with the same grammar and spelling."""

    where: str
    sha256: str
    markers: Markers
    plan: RowPlan | None = None
    fmt: base.WireFormat | None = None
    special: bool = True
    why: str = ""
    same_as: str | None = None
    read_by: list[str] = field(default_factory=list)
    writes_as: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)

    @property
    def name(self) -> str | None:
        return self.fmt.name if self.fmt is not None else None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "template": self.where,
            "sha256": self.sha256,
            "result": "special" if self.special else "row",
            "why": self.why,
            "markers": self.markers.as_dict(),
            "checks": list(self.checks),
            "read_by": list(self.read_by),
            "writes_as": list(self.writes_as),
        }
        if self.fmt is not None and self.plan is not None:
            out.update(
                name=self.fmt.name,
                grammar=self.plan.grammar.__name__,
                spelling=self.plan.spelling_dict(),
                same_as=self.same_as,
                example=self.fmt.example,
                tags=list(self.fmt.tags),
            )
        return out


def _family_name(where: str, sha: str) -> str:
    return f"derived_{sha[:10]}"


def derive_template(template: ChatTemplate, name: str | None = None) -> Derived:
    """:func:`derive` on a loaded template."""
    sha = hashlib.sha256(template.source.encode("utf-8")).hexdigest()
    compiled = compile_template(template)
    tried = []
    for content in CONTENTS:
        out = _derive_once(template, compiled, sha, name, content)
        if not out.special:
            break
        tried.append(out)
    else:
        out = next((d for d in tried if d.markers.shape), tried[0])
    out.read_by, out.writes_as = _read_by(out.markers)
    return out


def _read_by(markers: Markers) -> tuple[list[str], list[str]]:
    """The built-in formats that read the template's render of the placeholder calls back exactly (hand-written
    modules included; the one the render's own markers name first), and those of them that also write the calls as
    the template does (whitespace aside)."""
    text = markers.renders.get("two", "")
    if NAMES[1] not in text:
        return [], []
    found = []
    for fmt in base.by_rank():
        try:
            if tuple(fmt.parse_strict(text)) == EXPECTED:
                found.append(fmt.name)
        except base.FormatError:
            continue
    detected = detect_format(text)  # the format the text's own markers name goes first
    found.sort(key=lambda n: n != detected)
    squeezed = "".join(text.split())
    writes = [n for n in found if _renders_as(base.get(n), squeezed)]
    return found, writes


def _renders_as(fmt: base.WireFormat, squeezed: str) -> bool:
    try:
        return "".join(fmt.render(list(EXPECTED)).split()) == squeezed
    except base.RenderError:
        return False


def _derive_once(template: ChatTemplate, compiled: Any, sha: str, name: str | None, content: str) -> Derived:
    markers = analyze(template, content, compiled)
    out = Derived(template.where, sha, markers)
    if not markers.shape:
        out.why = markers.why
        return out
    plan = plan_row(markers)
    if isinstance(plan, str):
        out.why = plan
        return out
    fmt = plan.build(name or _family_name(template.where, sha), template.where, sha)
    out.plan, out.fmt = plan, fmt
    problem = plan.check(fmt, markers, out.checks)
    if problem:
        out.fmt, out.why = None, problem
        return out
    out.special = False
    out.same_as = next((f.name for f in base.all_formats() if plan.same_spelling(f)), None)
    return out


def derive(path: str | Path, name: str | None = None) -> Derived:
    """Derives the dialect of the chat template at ``path``; raises :class:`TemplateFailure` (naming the file) when
    the template cannot be read, compiled or rendered. ``name``: the derived row's name (default
    ``derived_<sha256 prefix>``)."""
    return derive_template(load_template(path), name)


def install(derived: Derived) -> str:
    """The registry name that reads and writes the derived dialect: the built-in row with the same spelling, else a
    built-in format that reads and writes the template's calls as it does (``writes_as``: a hand-written module,
    with its own repairs), else the derived row, registered under its name (once; registering it again is a no-op);
    for a special family, the first built-in format that reads the template's calls back (``read_by``). Raises ``ValueError`` for a special
    family no format reads, or a name already registered with another spelling."""
    if derived.special or derived.fmt is None or derived.plan is None:
        if derived.read_by:
            return (derived.writes_as or derived.read_by)[0]
        raise ValueError(f"{derived.where}: no row derived ({derived.why}), and no built-in format reads the "
                         "template's calls")
    if derived.same_as:
        return derived.same_as
    if derived.writes_as:  # a built-in module that reads and writes the template's calls as it does
        return derived.writes_as[0]
    name = derived.fmt.name
    if name in base.names():
        if not derived.plan.same_spelling(base.get(name)):
            raise ValueError(f"wire format {name!r} is already registered with another spelling")
        return name
    base.register(type(derived.fmt))
    return name
