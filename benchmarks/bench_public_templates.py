"""Every public chat template of llama.cpp (``models/templates/*.jinja``) put through derivation: one table row per
template, written to ``benchmarks/results/bench_public_templates.md``.

The templates are read at run time from the sdist of llama-cpp-python, which vendors llama.cpp (none is copied into
this repository). Per template: its sha256; what derivation gives (``derive``, the function behind
``tool-refiner formats derive``): a grammar row, the record's generic reader, or nothing, with the reason derivation
reports; the built-in row with the same spelling (``same as``); the template's family (the facts written once in
``tests/test_public_templates.py``) and, when that family is registered, whether the derived row is that family's
row, and if not, why; the built-in formats that read the template's own render of two calls back exactly
(``read by``); the format ``Refiner(chat_template=...)`` settles on (``used``); and whether that refiner read a call
from prose (it must not). A template that fails is a row with its reason, never a stop.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_public_templates.py --download
    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_public_templates.py --sdist PATH [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from refiner.formats import base, catalog
from refiner.formats.derive import TemplateFailure, derive
from refiner.formats.derive.render import ChatTemplate
from refiner.formats.derive.rows import _core, policies  # a spelling less what no template says; what that is
from refiner.formats.family import Row
from refiner.pipeline import Refiner

PACKAGE, VERSION = "llama-cpp-python", "0.3.36"
TEMPLATES_DIR = "/vendor/llama.cpp/models/templates/"
CACHE = Path.home() / ".cache" / "tool-refiner"
OUT = ROOT / "benchmarks" / "results" / "bench_public_templates.md"

# Offered tools and answers in plain prose that name them and their parameters: no reader may find a call here.
PROSE_TOOLS = [
    {"type": "function", "function": {"name": "find_train", "description": "trains between two stations",
                                      "parameters": {"type": "object", "properties": {
                                          "origin": {"type": "string"}, "destination": {"type": "string"},
                                          "seats": {"type": "integer"}}, "required": ["origin", "destination"]}}},
    {"type": "function", "function": {"name": "book_room", "description": "a hotel room",
                                      "parameters": {"type": "object", "properties": {
                                          "town": {"type": "string"}, "nights": {"type": "integer"}}}}},
]
PROSE = (
    "I can look for trains with find_train once I know the origin and the destination; how many seats do you need?",
    "Before I use book_room, tell me the town and the number of nights. The origin of your trip matters less.",
    "Sure. find_train takes an origin, a destination and seats, and book_room takes a town and nights; which first?",
)


@dataclass
class Entry:
    """One template's row: ``result`` is ``row``, ``record`` (the record's generic reader), ``special`` (nothing
    derived), ``failed`` (the template does not load or render: ``TemplateFailure``) or ``crashed`` (any other
    exception, a bug)."""

    template: str
    sha256: str
    result: str = ""
    derived: str | None = None
    same_as: str | None = None
    why: str = ""
    read_by: list[str] = field(default_factory=list)
    writes_as: list[str] = field(default_factory=list)
    family: str | None = None
    equal: bool | None = None
    why_not: str = ""
    policy: str = ""
    named: str = ""
    used: str | None = None
    refused: str = ""
    prose_calls: list[str] = field(default_factory=list)


def fetch_sdist(cache: Path = CACHE) -> Path:
    """The pinned sdist, downloaded once into ``cache`` with pip (raises ``OSError`` when it cannot be had)."""
    folder = cache / f"{PACKAGE}-{VERSION}"
    found = sorted(folder.glob("*.tar.gz"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", f"{PACKAGE}=={VERSION}", "--no-deps", "--no-binary", ":all:",
           "-d", str(folder)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    except subprocess.TimeoutExpired:
        raise OSError(f"pip download {PACKAGE}=={VERSION} took more than 900 s") from None
    found = sorted(folder.glob("*.tar.gz"))
    if done.returncode != 0 or not found:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise OSError(f"pip download {PACKAGE}=={VERSION} failed: {lines[-1] if lines else done.returncode}")
    return found[0]


def read_templates(sdist: Path) -> list[tuple[str, str]]:
    """``(file name, source)`` of every ``models/templates/*.jinja`` in the sdist, sorted by name, read from the tar
    without unpacking it."""
    out = []
    with tarfile.open(sdist) as tar:
        for member in tar:
            name = member.name.rsplit("/", 1)[-1]
            if member.isfile() and TEMPLATES_DIR in member.name and name.endswith(".jinja"):
                out.append((name, tar.extractfile(member).read().decode("utf-8")))
    return sorted(out)


@contextmanager
def registry_kept() -> Iterator[None]:
    """The format registry as it was before, whatever ``Refiner(chat_template=...)`` registers meanwhile (so one
    template's derived row is never another's ``same as``)."""
    saved = dict(base._REGISTRY)
    try:
        yield
    finally:
        base._REGISTRY.clear()
        base._REGISTRY.update(saved)


def _short(text: str, n: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _spelling(x: object) -> dict:
    return asdict(x) if is_dataclass(x) else {}


def family_row(name: str | None) -> Row | None:
    return next((r for r in catalog.CATALOG if r.family.name == name), None)


def why_not_equal(entry: Entry, spelling: object, grammar: type | None) -> str:
    """Why the derived dialect is not the catalog row of ``entry.family``: derivation's own reason, the record's
    reader in place of a row, another grammar, or the spelling fields that differ (reading policies aside)."""
    if entry.result in ("special", "failed", "crashed"):
        return f"nothing derived: {entry.why}" if entry.why else "nothing derived"
    if entry.result == "record":
        return "derived the record's generic reader, not a grammar row"
    row = family_row(entry.family)
    if grammar is None:
        return f"derived {entry.same_as}'s row, a grammar of its own" if entry.same_as else "no grammar derived"
    if not issubclass(row.grammar, grammar):
        return f"derived a {grammar.__name__} row; {entry.family} is a {row.grammar.__name__} row"
    ours, theirs = _spelling(_core(spelling)), _spelling(_core(row.spelling))
    differ = [f"{k}: {ours.get(k)!r} vs {theirs.get(k)!r}" for k in ours if ours.get(k) != theirs.get(k)]
    return "spelling (derived vs catalog): " + "; ".join(differ) if differ else "the same spelling but another name"


def policy_of(row: Row, spelling: object, grammar: type | None) -> str:
    """The catalog row's reading policies that the derived row of the same grammar does not have (no template says
    them: they are the row's, not a mismatch), and the readers of its own when its grammar is the derived one's
    with other readers."""
    if grammar is None or not issubclass(row.grammar, grammar):
        return ""
    ours, theirs = policies(spelling), policies(row.spelling)
    found = [f"{k}={_brief(v)}" for k, v in theirs.items() if ours.get(k) != v]
    if row.grammar is not grammar:
        found.insert(0, f"{row.grammar.__name__}'s readers")
    return ", ".join(found)


def _brief(value: object) -> str:
    """A policy's value as the table shows it: a tuple of other spellings by their count."""
    if isinstance(value, tuple) and value and not isinstance(value[0], str):
        return f"({len(value)} other spelling{'s' * (len(value) > 1)})"
    return repr(value)


def named_sha(row: Row, template: str, sha: str) -> str:
    """Whether the catalog row names ``template`` among the templates it was checked against: ``yes`` (with this
    sha256 prefix), ``other sha`` (another version of it), or ``""``."""
    if catalog.llama_cpp_template(template, sha[: catalog.SHA_CHARS]) in row.family.sources:
        return "yes"
    stale = catalog.llama_cpp_template(template, "")[:-1]
    return "other sha" if any(s.startswith(stale) for s in row.family.sources) else ""


def survey_template(name: str, source: str, family: str | None = None, workdir: Path | None = None) -> Entry:
    """One template's row (never raises)."""
    entry = Entry(name, hashlib.sha256(source.encode("utf-8")).hexdigest(), family=family)
    spelling = grammar = None
    try:
        d = derive(ChatTemplate(source, name))
    except TemplateFailure as e:
        entry.result, entry.why = "failed", _short(str(e).removeprefix(f"{name}: "))
    except Exception as e:  # noqa: BLE001 (a bug in derivation: a row of the table, not a stop)
        entry.result, entry.why = "crashed", _short(f"{type(e).__name__}: {e}")
    else:
        entry.result = "special" if d.special else "record" if d.from_record else "row"
        entry.derived, entry.same_as, entry.why = d.name, d.same_as, _short(d.why)
        entry.read_by, entry.writes_as = list(d.read_by), list(d.writes_as)
        if d.plan is not None:
            spelling, grammar = d.plan.spelling, d.plan.grammar
    row = family_row(family)
    if row is not None:
        entry.equal = entry.result == "row" and entry.same_as == family
        if not entry.equal:
            entry.why_not = why_not_equal(entry, spelling, grammar)
        entry.policy, entry.named = policy_of(row, spelling, grammar), named_sha(row, name, entry.sha256)
    _use(entry, source, workdir)
    return entry


def _use(entry: Entry, source: str, workdir: Path | None) -> None:
    """What ``Refiner(chat_template=...)`` settles on for the template, and the calls it reads from prose."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp, registry_kept():
        path = Path(tmp) / entry.template
        path.write_text(source, encoding="utf-8")
        try:
            refiner = Refiner(chat_template=path)
        except Exception as e:  # noqa: BLE001 (a refusal to start: reported, never a stop)
            entry.refused = _short(f"{type(e).__name__}: {e}")
            return
        entry.used = refiner.fmt
        for text in PROSE:
            try:
                out = refiner.refine({"tools": PROSE_TOOLS, "query": "Plan my trip.", "upstream": text})
            except Exception as e:  # noqa: BLE001
                entry.prose_calls.append(_short(f"raised {type(e).__name__}: {e}", 80))
                continue
            entry.prose_calls += [c["name"] if isinstance(c, dict) else str(c) for c in out["calls"]]


def survey(sdist: Path, families: Mapping[str, str | None] | None = None) -> list[Entry]:
    """Every template of the sdist, one :class:`Entry` each; ``families``: template file name -> catalog family."""
    families = families or {}
    return [survey_template(name, source, families.get(name)) for name, source in read_templates(sdist)]


def counts(entries: list[Entry]) -> dict[str, int]:
    """How many templates, by result, and how many derive their registered family's row."""
    by = Counter(e.result for e in entries)
    with_row = [e for e in entries if e.equal is not None]
    return {"templates": len(entries), **{k: by.get(k, 0) for k in ("row", "record", "special", "failed", "crashed")},
            "row equal to a built-in row": sum(1 for e in entries if e.same_as),
            "registered family": len(with_row), "family row derived": sum(1 for e in with_row if e.equal),
            "named by its row": sum(1 for e in with_row if e.named == "yes"),
            "refused": sum(1 for e in entries if e.refused),
            "calls from prose": sum(1 for e in entries if e.prose_calls)}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ") if text not in (None, "", []) else "-"


def markdown(entries: list[Entry], source: str) -> str:
    """The results table, a count line at the top."""
    c = counts(entries)
    head = (f"{c['templates']} templates: {c['row']} derived as a grammar row ({c['row equal to a built-in row']} "
            f"equal to a built-in row), {c['record']} by the record's generic reader, {c['special']} special, "
            f"{c['failed']} failed to render, {c['crashed']} crashed; {c['registered family']} of a registered family, "
            f"{c['family row derived']} of them derive that family's row, {c['named by its row']} are named with their "
            f"sha256 by that row; {c['refused']} refused to start; "
            f"{c['calls from prose']} read a call from prose.")
    lines = [
        "# llama.cpp's public chat templates through derivation", "", head, "",
        (f"Templates: `models/templates/*.jinja` of {source}, read from the sdist at run time "
        "(`benchmarks/bench_public_templates.py`). `result`: what `derive` gives; `same as`: the built-in row of the "
        "same spelling; `family`: the template's family when it is registered (`tests/test_public_templates.py`), "
        "`equal`: the derived row is that family's row (reading policies aside), else why not; `policy`: the "
        "catalog row's reading policies the derived row lacks (no template says them); `named`: the catalog row "
        "names the template with this sha256 among the templates it was checked against; `read by`: built-in formats "
        "that read the template's render of two calls back exactly; `used`: the format `Refiner(chat_template=...)` "
        "settles on (`-`: detection per request)."), "",
        ("| template | sha256 | result | same as | why (derivation) | family | equal | why not | policy | named "
         "| read by | used |"),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        equal = "-" if e.equal is None else "yes" if e.equal else "no"
        used = e.used if not e.refused else f"refused: {e.refused}"
        if e.prose_calls:
            used = f"{used} (calls from prose: {', '.join(e.prose_calls)})"
        lines.append("| " + " | ".join(_cell(x) for x in (
            e.template, f"`{e.sha256[:12]}`", e.result, e.same_as, e.why, e.family, equal, e.why_not, e.policy, e.named,
            ", ".join(e.read_by), used)) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdist", type=Path, help=f"the {PACKAGE} sdist (.tar.gz)")
    ap.add_argument("--download", action="store_true", help=f"fetch {PACKAGE}=={VERSION} into --cache with pip")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.sdist is None and not args.download:
        ap.error("give --sdist PATH or --download")
    sdist = args.sdist or fetch_sdist(args.cache)
    sys.path.insert(0, str(ROOT / "tests"))
    from test_public_templates import FAMILIES

    derive_log = logging.getLogger("refiner.formats.derive")
    level = derive_log.level
    derive_log.setLevel(logging.ERROR)  # the table gives each template's reason
    try:
        entries = survey(sdist, FAMILIES)
    finally:
        derive_log.setLevel(level)
    text = markdown(entries, sdist.name)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
