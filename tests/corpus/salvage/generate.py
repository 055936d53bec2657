"""Writes ``bfcl_generated.jsonl``: BFCL questions answered the ways real models fail to follow the pythonic format.

Each row takes one BFCL question (its specs and possible answers stay in the bfcl-eval wheel; the row names it by
``bfcl_id``) and writes its correct calls (BFCL's first accepted answer) in one failure shape: a pythonic list with
prose around it, several lists, bare calls, code fences of every kind, JSON-ish objects, the model's native
``<tool_call>`` blocks, quoted call strings, markdown escapes, ... ; ``calls`` is what a careful reader recovers
(the calls as the model meant them: written names normalised to the offered tool, positional values given their
parameter). Talk-only rows (declines, questions back, explanations that mention a tool or its signature without a
call) expect no call. The shapes are written here from how model outputs look, independently of the project's
readers; nothing here parses.

    python tests/corpus/salvage/generate.py [--out PATH] [--seed N]

Deterministic for a seed (tests/test_salvage_corpus.py checks that the committed file is this script's output).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from refiner.eval import bfcl_ast
from refiner.eval.bfcl import CATEGORIES, find_wheel, read_category

SEED = 1205
OUT = Path(__file__).resolve().parent / "bfcl_generated.jsonl"
# Records whose possible answer no output satisfies (see tests/test_eval_bfcl.py): not used.
SKIP = {"live_simple_106-63-0", "live_simple_112-68-0", "live_multiple_862-181-3", "live_multiple_964-207-0"}

Call = tuple[str, dict[str, Any]]

INTROS = [
    "Sure! Here is the function call:",
    "Here's what I'll call:",
    "To answer this, I'll use the available function.",
    "I'll make the following call(s).",
    "Based on your request, the right call is:",
    "Okay, let's get that for you.",
    "The user wants this, so I will call the tool.",
    "Of course. I'm calling the function with the values you gave:",
]
OUTROS = [
    "This will return the result you asked for.",
    "Let me know if you'd like anything else!",
    "I've filled in the parameters from your question.",
    "These calls cover everything you asked for.",
    "Note: I assumed default values for anything you didn't mention.",
    "Once I get the results, I'll summarise them for you.",
]


# ----------------------------------------------------------------------------------------------------------------
# Writing values and calls the way models write them


def py_value(v: Any) -> str:
    """A value as a Python literal (repr: single-quoted strings, True/None)."""
    return repr(v)


def json_value(v: Any) -> str:
    """A value as JSON text (double quotes, true/null): how JSON-trained models fill pythonic calls."""
    return json.dumps(v, ensure_ascii=False)


def py_call(call: Call, value: Callable[[Any], str] = py_value, positional: list[str] | None = None) -> str:
    name, args = call
    parts = []
    pos = list(positional or [])
    for k, v in args.items():
        if pos and pos[0] == k:
            parts.append(value(v))
            pos.pop(0)
        else:
            pos = []
            parts.append(f"{k}={value(v)}")
    return f"{name}({', '.join(parts)})"


def py_list(calls: list[Call], value: Callable[[Any], str] = py_value, sep: str = ", ") -> str:
    return "[" + sep.join(py_call(c, value) for c in calls) + "]"


def pick_value_style(rng: random.Random) -> Callable[[Any], str]:
    return json_value if rng.random() < 0.3 else py_value


def intro(rng: random.Random) -> str:
    return rng.choice(INTROS)


def outro(rng: random.Random) -> str:
    return rng.choice(OUTROS)


# ----------------------------------------------------------------------------------------------------------------
# Shapes: (rng, calls, functions) -> (text, expected calls or None for "the calls as given")

Shape = Callable[[random.Random, list[Call], list[dict]], tuple[str, list[Call] | None]]


def prose_after(rng, calls, fns):
    return f"{py_list(calls, pick_value_style(rng))}\n\n{outro(rng)}", None


def prose_before(rng, calls, fns):
    sep = rng.choice(["\n", "\n\n", " "])
    return f"{intro(rng)}{sep}{py_list(calls, pick_value_style(rng))}", None


def prose_around(rng, calls, fns):
    return f"{intro(rng)}\n{py_list(calls, pick_value_style(rng))}\n{outro(rng)}", None


def lists_per_line(rng, calls, fns):
    style = pick_value_style(rng)
    return "\n".join(py_list([c], style) for c in calls), None


def bare_lines(rng, calls, fns):
    style = pick_value_style(rng)
    body = "\n".join(py_call(c, style) for c in calls)
    if len(calls) == 1 or rng.random() < 0.4:
        body = f"{intro(rng)}\n{body}"
    return body, None


def bare_semicolon(rng, calls, fns):
    style = pick_value_style(rng)
    return rng.choice(["; ", ";", ";\n"]).join(py_call(c, style) for c in calls), None


def fence_python(rng, calls, fns):
    lang = rng.choice(["python", "py", "python3"])
    text = f"```{lang}\n{py_list(calls, pick_value_style(rng))}\n```"
    if rng.random() < 0.5:
        text = f"{intro(rng)}\n\n{text}"
    if rng.random() < 0.5:
        text = f"{text}\n{outro(rng)}"
    return text, None


def fence_plain(rng, calls, fns):
    return f"```\n{py_list(calls, pick_value_style(rng))}\n```\n\n{outro(rng)}", None


def fence_indented(rng, calls, fns):
    lines = "\n".join("    " + py_call(c, pick_value_style(rng)) for c in calls)
    return f"{intro(rng)}\n\n{lines}\n", None


def code_return(rng, calls, fns):
    body = py_list(calls, pick_value_style(rng), sep=",\n        ")
    fn = rng.choice(["answer", "solve", "get_calls"])
    return f"```python\ndef {fn}():\n    return {body}\n```", None


def _json_call(call: Call, args_key: str) -> dict:
    return {"name": call[0], args_key: call[1]}


def fence_json(rng, calls, fns):
    key = rng.choice(["arguments", "parameters"])
    objs = [_json_call(c, key) for c in calls]
    value = objs if len(objs) > 1 or rng.random() < 0.5 else objs[0]
    text = f"```json\n{json.dumps(value, indent=rng.choice([None, 2]), ensure_ascii=False)}\n```"
    if rng.random() < 0.5:
        text = f"{intro(rng)}\n{text}"
    return text, None


def json_single_quotes(rng, calls, fns):
    objs = [_json_call(c, "parameters") for c in calls]
    if len(objs) == 1 and rng.random() < 0.5:
        text = repr(objs[0])
    elif rng.random() < 0.5:
        text = "[" + ", ".join(repr(o) for o in objs) + "]"
    else:
        text = "\n".join(repr(o) for o in objs)
    if rng.random() < 0.3:
        text = f"{intro(rng)}\n{text}"
    return text, None


def hermes(rng, calls, fns):
    key = "arguments" if rng.random() < 0.8 else "parameters"
    blocks = "\n".join(
        f"<tool_call>\n{json.dumps(_json_call(c, key), ensure_ascii=False)}\n</tool_call>" for c in calls
    )
    r = rng.random()
    if r < 0.3:
        blocks = f"<think>\nThe user asks for this; I have the values I need.\n</think>\n\n{blocks}"
    elif r < 0.6:
        blocks = f"{intro(rng)}\n{blocks}"
    return blocks, None


def quoted_strings(rng, calls, fns):
    if rng.random() < 0.5:  # a Python list of strings: double-quoted values inside single-quoted strings
        text = "[" + ", ".join("'" + py_call(c, json_value) + "'" for c in calls) + "]"
    else:  # a JSON list of strings
        text = json.dumps([py_call(c, py_value) for c in calls])
    return text, None


def _escape(s: str) -> str:
    return s.replace("_", "\\_")


def md_escaped(rng, calls, fns):
    style = pick_value_style(rng)
    keys = rng.random() < 0.5
    parts = []
    for name, args in calls:
        inner = ", ".join(f"{_escape(k) if keys else k}={style(v)}" for k, v in args.items())
        parts.append(f"{_escape(name)}({inner})")
    text = "[" + ", ".join(parts) + "]"
    if rng.random() < 0.6:
        text = f"{intro(rng)}\n\n{text}"
    return text, None


def mixed(rng, calls, fns):
    r = rng.random()
    if r < 0.25:  # native blocks inside a fence, with prose
        blocks = "\n".join(f"<tool_call>\n{json.dumps(_json_call(c, 'arguments'))}\n</tool_call>" for c in calls)
        return f"{intro(rng)}\n```\n{blocks}\n```\n{outro(rng)}", None
    if r < 0.5:  # a JSON list in prose, single quotes, trailing text on the same line
        objs = "[" + ", ".join(repr(_json_call(c, "arguments")) for c in calls) + "]"
        return f"{intro(rng)} {objs} {outro(rng)}", None
    if r < 0.75:  # bullets of bare calls between prose
        lines = "\n".join(f"- {py_call(c, pick_value_style(rng))}" for c in calls)
        return f"{intro(rng)}\n{lines}\n\n{outro(rng)}", None
    # numbered calls in inline code
    lines = "\n".join(f"{i}. `{py_call(c, pick_value_style(rng))}`" for i, c in enumerate(calls, 1))
    return f"{intro(rng)}\n{lines}", None


def positional(rng, calls, fns):
    order = {f["name"]: list((f.get("parameters") or {}).get("properties") or {}) for f in fns}
    parts = []
    for c in calls:
        params = order.get(c[0], [])
        lead = []
        for p in params:
            if p in c[1] and list(c[1]).index(p) == len(lead):
                lead.append(p)
            else:
                break
        ordered = (c[0], {**{p: c[1][p] for p in lead}, **{k: v for k, v in c[1].items() if k not in lead}})
        parts.append(py_call(ordered, py_value, positional=lead))
    return f"{intro(rng)}\n[{', '.join(parts)}]", None


def name_variant(rng, calls, fns):
    written = []
    for name, args in calls:
        if "." in name:
            w = name.replace(".", "_")
        else:
            w = rng.choice(["functions.", "default_api."]) + name
        written.append((w, args))
    return f"{py_list(written, pick_value_style(rng))}\n{outro(rng)}", None


def restated(rng, calls, fns):
    first = calls[0]
    mention = f"I'll call {py_call(first, py_value)} to get this."
    return f"{mention}\n\n{py_list(calls, py_value)}", None


def think_draft(rng, calls, fns):
    name, args = calls[0]
    draft_args = dict(args)
    for k, v in draft_args.items():  # a first idea with another value, dropped in the answer
        if isinstance(v, str):
            draft_args[k] = v + " (draft)"
            break
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            draft_args[k] = v + 1
            break
    draft = py_call((name, draft_args))
    return (f"<think>\nFirst idea: {draft}. No, let me use the exact values from the question.\n</think>\n\n"
            f"{py_list(calls, pick_value_style(rng))}\n{outro(rng)}"), None


# Talk-only answers: no call may be read.


def _params(fn: dict) -> list[str]:
    return list((fn.get("parameters") or {}).get("properties") or {}) or ["value"]


def talk_decline(rng, calls, fns):
    topic = rng.choice(["booking that", "this request", "that kind of question", "real-time data"])
    return rng.choice([
        f"I'm sorry, but none of the available functions can help with {topic}.",
        "Unfortunately, I don't have a function that does this.",
        f"I can't help with {topic}: the functions provided don't cover it. Is there something else I can do?",
    ]), []


def talk_ask(rng, calls, fns):
    fn = rng.choice(fns)
    p = rng.choice(_params(fn))
    return rng.choice([
        f"Could you tell me the {p.replace('_', ' ')} you'd like to use?",
        f"To call {fn['name']}, I need the value of `{p}`. What should it be?",
        f"Before I run {fn['name']}, which {p} do you mean?",
    ]), []


def talk_mention(rng, calls, fns):
    fn = rng.choice(fns)
    ps = _params(fn)
    return rng.choice([
        f"You could use {fn['name']} to do this; it takes {', '.join(ps[:2])}.",
        f"The `{fn['name']}` function would handle this, but I need more details first.",
        f"{fn['name']} is the right tool here once we know the {ps[0]}.",
    ]), []


def talk_signature(rng, calls, fns):
    fn = rng.choice(fns)
    ps = _params(fn)[:3]
    sig = f"{fn['name']}({', '.join(ps)})"
    return rng.choice([
        f"The function {sig} can compute this. Please give me the values.",
        f"You'd call {fn['name']}({', '.join(p + '=...' for p in ps)}) with your own values.",
        f"```python\n{sig}\n```\nI need the values before I can call it.",
        f"Use {fn['name']}({ps[0]}=<{ps[0]}>) once you know the {ps[0]}.",
    ]), []


def talk_spec_quote(rng, calls, fns):
    fn = rng.choice(fns)
    spec = {"name": fn["name"], "description": fn.get("description", ""), "parameters": fn.get("parameters", {})}
    return f"I have this function available:\n{json.dumps(spec)}\nWhat values should I use?", []


# shape -> (rows, minimum calls per answer, writer, kind)
SHAPES: dict[str, tuple[int, int, Shape, str]] = {
    "prose_after": (30, 1, prose_after, "call"),
    "prose_before": (30, 1, prose_before, "call"),
    "prose_around": (20, 1, prose_around, "call"),
    "lists_per_line": (25, 2, lists_per_line, "call"),
    "bare_lines": (25, 1, bare_lines, "call"),
    "bare_semicolon": (20, 2, bare_semicolon, "call"),
    "fence_python": (25, 1, fence_python, "call"),
    "fence_plain": (15, 1, fence_plain, "call"),
    "fence_indented": (15, 1, fence_indented, "call"),
    "code_return": (15, 1, code_return, "call"),
    "fence_json": (20, 1, fence_json, "call"),
    "json_single_quotes": (25, 1, json_single_quotes, "call"),
    "hermes": (25, 1, hermes, "call"),
    "quoted_strings": (20, 1, quoted_strings, "call"),
    "md_escaped": (20, 1, md_escaped, "call"),
    "mixed": (20, 1, mixed, "call"),
    "positional": (15, 1, positional, "call"),
    "name_variant": (15, 1, name_variant, "call"),
    "restated": (15, 1, restated, "call"),
    "think_draft": (15, 1, think_draft, "call"),
    "talk_decline": (15, 1, talk_decline, "talk"),
    "talk_ask": (20, 1, talk_ask, "talk"),
    "talk_mention": (20, 1, talk_mention, "talk"),
    "talk_signature": (20, 1, talk_signature, "talk"),
    "talk_spec_quote": (10, 1, talk_spec_quote, "talk"),
}


def questions(wheel: Path) -> list[tuple[str, str, list[dict], list[Call]]]:
    """``(category, id, functions, gold calls)`` for every usable BFCL question."""
    out = []
    for cat in CATEGORIES:
        for rec, possible in read_category(wheel, cat):
            if rec["id"] in SKIP:
                continue
            gold = bfcl_ast.first_answer(possible, rec["function"])
            out.append((cat, rec["id"], rec["function"], [(c.name, dict(c.arguments)) for c in gold]))
    return out


def suitable(shape: str, calls: list[Call], minimum: int) -> bool:
    if len(calls) < minimum or not calls[0][1] and shape in ("restated", "think_draft", "positional"):
        return False
    if shape == "md_escaped":
        return any("_" in name for name, _ in calls)
    if shape == "positional":
        return all(c[1] for c in calls)
    return True


def generate(seed: int = SEED, wheel: Path | None = None) -> list[dict]:
    rng = random.Random(seed)
    pool = questions(wheel or find_wheel())
    rows = []
    for shape, (n, minimum, write, kind) in SHAPES.items():
        fits = [q for q in pool if suitable(shape, q[3], minimum)]
        for k, (cat, qid, fns, gold) in enumerate(rng.sample(fits, n)):
            text, expected = write(rng, gold, fns)
            calls = [] if kind == "talk" else (expected if expected is not None else gold)
            rows.append({
                "id": f"{shape}-{k}",
                "shape": shape,
                "kind": kind,
                "format": "toolace",
                "bfcl_id": qid,
                "category": cat,
                "text": text,
                "calls": [{"name": name, "arguments": args} for name, args in calls],
            })
    return rows


def dump(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args()
    rows = generate(args.seed)
    args.out.write_text(dump(rows), encoding="utf-8")
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    main()
