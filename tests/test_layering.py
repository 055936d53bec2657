"""Imports flow one way (docs/architecture.md, "Layers"): every module of refiner/, rewards/ and data_gen/ imports
only modules of its own layer or of the layers below, at the top of the module or inside a function alike.

The table is read from top to bottom: a layer may import the layers above it in the table, never those below. The
core and the reward have no import cycle. An import inside a function is there for one reason only: the module it
imports is a heavy optional dependency (HEAVY, which the library never imports at load time), or the importer is the
CLI, whose subcommands load their library when they run so that ``tool-refiner --help`` starts fast.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("refiner", "rewards", "data_gen")

# (layer, module prefixes), lowest first. "refiner" names the package's __init__ only.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("call model", ("refiner", "refiner.calls")),
    ("readers", ("refiner.formats", "refiner.specs")),
    ("checks, prompt, engines", ("refiner.gate", "refiner.repair", "refiner.prompt", "refiner.engines")),
    ("pipeline", ("refiner.pipeline",)),
    ("rewards", ("rewards",)),
    ("data", ("data_gen",)),
    ("applications", ("refiner.eval", "refiner.proxy", "refiner.train", "refiner.export", "refiner.plot")),
    ("cli", ("refiner.cli", "refiner.commands")),
)
CORE_AND_REWARD = ("call model", "readers", "checks, prompt, engines", "pipeline", "rewards")
LAZY_LAYERS = ("cli",)  # may import anything inside a function: subcommands load their library when run

# Optional heavy dependencies: imported inside the function that needs them, never when a library module loads
# (inference without a GPU stack, the reward on a verl worker, data building without plotting...).
HEAVY = ("vllm", "torch", "transformers", "datasets", "json_repair", "verl", "ray", "hydra", "omegaconf", "pyarrow",
         "pandas", "matplotlib", "uvicorn", "huggingface_hub")

# In-function imports of project modules outside the CLI that remain in modules this layering does not yet cover,
# each with the change that removes it; an entry that no longer matches an import fails the test (delete it).
PENDING: dict[tuple[str, str], str] = {
    ("data_gen.corrupt.llm", "refiner.engines"): "import make_engine at the top (engines load their backends lazily)",
    ("refiner.engines", "refiner.engines.hf"): "import at the top (hf.py imports torch lazily)",
    ("refiner.engines", "refiner.engines.openai_http"): "import at the top",
    ("refiner.engines", "refiner.engines.vllm_offline"): "import at the top (vllm_offline.py imports vllm lazily)",
    ("refiner.export", "refiner.plot"): "import at the top (plot.py imports matplotlib lazily)",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {
    module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py")) if "__pycache__" not in p.parts
}


def layer_of(module: str) -> str | None:
    best, found = -1, None
    for layer, prefixes in LAYERS:
        for prefix in prefixes:
            matches = module == prefix or (prefix != "refiner" and module.startswith(prefix + "."))
            if matches and len(prefix) > best:
                best, found = len(prefix), layer
    return found


RANK = {layer: i for i, (layer, _) in enumerate(LAYERS)}


def _target(name: str) -> str:
    """The project module an import names (the longest existing prefix: ``refiner.formats.FormatError`` is
    ``refiner.formats``)."""
    parts = name.split(".")
    while parts and ".".join(parts) not in MODULES:
        parts.pop()
    return ".".join(parts)


def imports_of(module: str) -> list[tuple[str, int, bool]]:
    """``(imported project module, line, inside a function)`` for every import statement of ``module``."""
    path = MODULES[module]
    is_pkg = path.name == "__init__.py"
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".") if is_pkg else module.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                names = [f"{mod}.{a.name}" for a in child.names]
            else:
                visit(child, nested)
                continue
            for name in names:
                if name.split(".")[0] in PACKAGES:
                    found.append((_target(name), child.lineno, in_function))

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return list(dict.fromkeys(found))


EDGES = {m: imports_of(m) for m in MODULES}


def test_every_module_has_a_layer():
    assert MODULES and "refiner.pipeline" in MODULES
    missing = [m for m in MODULES if layer_of(m) is None]
    assert missing == [], f"add these modules to LAYERS (and to docs/architecture.md): {missing}"


def test_imports_flow_down():
    wrong = []
    for module, edges in EDGES.items():
        for target, line, _ in edges:
            if RANK[layer_of(target)] > RANK[layer_of(module)]:
                wrong.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {module} ({layer_of(module)}) imports "
                             f"{target} ({layer_of(target)})")
    assert wrong == [], "imports against the layers:\n" + "\n".join(wrong)


def _cycles(nodes: set[str]) -> list[list[str]]:
    """Strongly connected components with more than one module (or a module importing itself), Tarjan."""
    graph = {m: sorted({t for t, _, _ in EDGES[m] if t in nodes}) for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


def test_no_import_cycle_in_the_core_and_the_reward():
    nodes = {m for m in MODULES if layer_of(m) in CORE_AND_REWARD}
    assert _cycles(nodes) == []


def test_the_checks_see_a_wrong_import(monkeypatch):
    """A core module importing one above it is both against the layers and (here) a cycle; an unknown module has no
    layer (the bare "refiner" entry names the package's __init__ only)."""
    monkeypatch.setitem(EDGES, "refiner.calls", [*EDGES["refiner.calls"], ("refiner.gate", 1, True)])
    assert any({"refiner.calls", "refiner.gate"} <= set(c) for c in _cycles({m for m in MODULES}))
    with pytest.raises(AssertionError, match="refiner.calls .call model. imports refiner.gate"):
        test_imports_flow_down()
    with pytest.raises(AssertionError, match="imports refiner.gate inside a function"):
        test_imports_inside_functions_only_for_heavy_modules_or_the_cli()
    assert layer_of("refiner.not_in_the_table") is None and layer_of("refiner") == "call model"


def _in_function_imports() -> list[tuple[str, str, int]]:
    """``(module, imported project module, line)`` of every import inside a function outside the CLI."""
    return [(module, target, line) for module, edges in EDGES.items() if layer_of(module) not in LAZY_LAYERS
            for target, line, in_function in edges if in_function]


def test_imports_inside_functions_only_for_heavy_modules_or_the_cli():
    hidden = [f"{MODULES[module].relative_to(ROOT)}:{line}: {module} imports {target} inside a function"
              for module, target, line in _in_function_imports() if (module, target) not in PENDING]
    assert hidden == [], "move these imports to the top of their module:\n" + "\n".join(hidden)


def test_pending_entries_are_still_needed():
    stale = sorted(set(PENDING) - {(module, target) for module, target, _ in _in_function_imports()})
    assert stale == [], f"these PENDING entries no longer match an import: delete them: {stale}"


def test_heavy_optional_modules_stay_lazy():
    """Loading every library module (and the CLI) imports none of the heavy optional dependencies."""
    modules = sorted(MODULES)
    script = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        f"print(sorted(h for h in {HEAVY!r} if h in sys.modules))\n"
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout
