"""BFCL's AST categories from the ``bfcl-eval`` wheel (read as a zip), prompted in BFCL's style and scored by
:mod:`refiner.eval.bfcl_ast` (see docs/evaluation.md)."""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

from refiner import PROJECT_ROOT
from refiner.eval import bfcl_ast
from refiner.eval.common import BenchItem, Benchmark, Retagged, parse_jsonl, per_part, spread

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
              "live_parallel", "live_parallel_multiple")

SYSTEM_TEMPLATE = (
    "You are an expert in composing function calls. You get a question and a set of functions. Answer with the "
    "function call(s) that achieve the purpose of the question, and nothing else. If none of the functions can be "
    "used, say so; if the question lacks a required parameter, say so too.\n"
    "Write the calls in this form: [func_name1(param_name1=value1, param_name2=value2), func_name2(param=value)]\n"
    "Here is the list of functions you can call, in JSON:\n{functions}"
)


def find_wheel(path: str | Path | None = None) -> Path:
    """The bfcl-eval wheel: ``path``, else ``$TOOL_REFINER_BFCL_WHEEL``, else the newest in ``.cache/bfcl/``."""
    if path or os.environ.get("TOOL_REFINER_BFCL_WHEEL"):
        p = Path(path or os.environ["TOOL_REFINER_BFCL_WHEEL"])
        if not p.exists():
            raise FileNotFoundError(f"BFCL wheel {p} does not exist")
        return p
    wheels = sorted((PROJECT_ROOT / ".cache" / "bfcl").glob("bfcl_eval-*.whl"))
    if not wheels:
        raise FileNotFoundError(
            f"no bfcl_eval-*.whl in {PROJECT_ROOT / '.cache' / 'bfcl'} (run .ci/setup-env.sh or pass --bfcl-wheel)"
        )
    return wheels[-1]


def _latest(names: list[str], folder: str, category: str) -> str | None:
    """The newest ``<folder>BFCL_v<N>_<category>.json`` among ``names`` (exactly that category: "multiple" must not
    pick ``BFCL_v4_parallel_multiple.json``)."""
    pattern = re.compile(re.escape(folder) + r"BFCL_v(\d+)_" + re.escape(category) + r"\.json")
    found = sorted((int(m.group(1)), n) for n in names if (m := pattern.fullmatch(n)))
    return found[-1][1] if found else None


def read_category(wheel: Path, category: str) -> list[tuple[dict, list]]:
    """``(question record, possible answer)`` pairs of one category, joined on ``id``."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        q, a = _latest(names, "bfcl_eval/data/", category), _latest(names, "bfcl_eval/data/possible_answer/", category)
        if not q or not a:
            raise FileNotFoundError(f"{wheel}: no question or possible-answer file for BFCL category {category!r}")
        questions, answers = (parse_jsonl(zf.read(m).decode("utf-8"), f"{wheel}:{m}") for m in (q, a))
    by_id = {r["id"]: r["ground_truth"] for r in answers}
    out = []
    for r in questions:
        if r.get("id") not in by_id:
            raise ValueError(f"{wheel}:{q}: record {r.get('id')!r} has no possible answer")
        out.append((r, by_id[r["id"]]))
    return out


class BFCL(Benchmark):
    name = "bfcl"
    title = "BFCL AST"
    metrics = ("acc",)

    def __init__(self, wheel: str | Path | None = None, categories: tuple[str, ...] = CATEGORIES,
                 fmt: str = "toolace") -> None:
        super().__init__()
        self.wheel = wheel
        self.categories = categories
        self.fmt = fmt
        # BFCL's answers are bare pythonic lists: ToolACE's format without its <function_list> tags
        self.answers = Retagged(fmt, None) if fmt == "toolace" else Retagged(fmt)

    def answer_format(self, item: BenchItem) -> Retagged:
        return self.answers

    def load(self, limit: int | None = None) -> list[BenchItem]:
        wheel = find_wheel(self.wheel)
        out = []
        for cat in self.categories:
            for rec, possible in spread(read_category(wheel, cat), per_part(limit, len(self.categories))):
                turns = rec.get("question")
                if not isinstance(turns, list) or not turns or not isinstance(turns[0], list):
                    raise ValueError(f"{wheel} {cat} record {rec.get('id')}: field 'question' is not a list of turns")
                functions = rec.get("function")
                if not isinstance(functions, list):
                    raise ValueError(f"{wheel} {cat} record {rec.get('id')}: field 'function' is not a list")
                extra_system = [m["content"] for m in turns[0] if m.get("role") == "system"]
                dialogue = [m for m in turns[0] if m.get("role") != "system"]
                system = "\n\n".join([SYSTEM_TEMPLATE.format(functions=json.dumps(functions, ensure_ascii=False)),
                                       *extra_system])
                query = dialogue if len(dialogue) != 1 else dialogue[0]["content"]
                try:
                    gold = bfcl_ast.first_answer(possible, functions)
                except (KeyError, ValueError, AttributeError) as e:
                    raise ValueError(f"{wheel} {cat} record {rec.get('id')}: possible answer: {e}") from None
                out.append(BenchItem(f"bfcl-{rec['id']}", self.name, cat, system, query, tools=functions,
                                     fmt=self.fmt, gold=possible, gold_calls=gold,
                                     meta={"functions": functions},
                                     messages=[{"role": "system", "content": system}, *dialogue]))
        return out

    def score(self, item: BenchItem, text: str) -> dict[str, Any]:
        calls = self.read(item, text)
        ok = calls is not None and bfcl_ast.check(item.meta["functions"], calls, item.gold)
        return {"acc": float(bool(ok))}
