"""The docs cite only what exists: every project file path written in README.md and docs/*.md is a file or folder of
the repository, and every dotted project name (``refiner.x.y``, ``rewards.x``, ``data_gen.x``) is an importable module
or attribute: in the prose and inline code, and in the import statements of code blocks (the rest of a code block may
name a local variable ``refiner``). A path with a placeholder (``<area>``, ``*``, ``{...}``) is a pattern, not
checked."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
TOP = ("refiner", "data_gen", "rewards", "configs", "scripts", "tests", "benchmarks", "docs", ".ci")
ROOT_FILES = ("pyproject.toml", "README.md", "LICENSE")

_PATH = re.compile(r"(?<![\w./~-])((?:" + "|".join(map(re.escape, TOP)) + r")/[\w./<>*{}-]*)")
_ROOT_FILE = re.compile(r"(?<![\w./-])(" + "|".join(map(re.escape, ROOT_FILES)) + r")(?![\w/])")
_NAME = re.compile(r"(?<![\w./-])((?:refiner|rewards|data_gen)(?:\.[A-Za-z_]\w*)+)")
_FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+([\w, ]+)|import\s+([\w.]+))", re.MULTILINE)


def cited_paths(text: str) -> list[str]:
    out = []
    for m in _PATH.finditer(text):
        path = m.group(1).rstrip(".,:;")
        if not any(c in path for c in "<>*{}"):
            out.append(path)
    return out + _ROOT_FILE.findall(text)


def cited_names(text: str) -> list[str]:
    names = _NAME.findall(_FENCE.sub("", text))
    for block in _FENCE.findall(text):
        for frm, what, imp in _IMPORT.findall(block):
            if frm:
                names += [f"{frm}.{w.strip()}" for w in what.split(",") if w.strip()] or [frm]
            else:
                names.append(imp)
    return [n for n in names if n.split(".")[0] in ("refiner", "rewards", "data_gen")]


def resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_cited_paths_exist(doc):
    missing = sorted({p for p in cited_paths(doc.read_text(encoding="utf-8")) if not (ROOT / p).exists()})
    assert missing == [], f"{doc.relative_to(ROOT)} cites paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_cited_names_resolve(doc):
    missing = sorted({n for n in cited_names(doc.read_text(encoding="utf-8")) if not resolves(n)})
    assert missing == [], f"{doc.relative_to(ROOT)} cites names that do not exist: {missing}"


def test_the_extractors_find_what_the_docs_cite():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert {"refiner/calls.py", "tests/test_layering.py", "data_gen/corrupt/"} <= set(cited_paths(text))
    assert {"refiner.specs.load_tools", "refiner.calls.same_calls"} <= set(cited_names(text))
    sample = ("see `refiner/specs.py`, refiner/commands/<area>.py, `refiner.formats.nope` and pyproject.toml.\n"
              "```python\nfrom refiner.pipeline import Refiner, nothing\nrefiner = Refiner()\nrefiner.refine({})\n```\n")
    assert cited_paths(sample) == ["refiner/specs.py", "pyproject.toml"]
    assert not (ROOT / "refiner/specs.py").exists()  # a package now: the check above would flag it
    assert cited_names(sample) == ["refiner.formats.nope", "refiner.pipeline.Refiner", "refiner.pipeline.nothing"]
    assert not resolves("refiner.formats.nope") and not resolves("refiner.pipeline.nothing")
    assert resolves("refiner.formats.get") and resolves("rewards.compute_score")
