"""Model families nobody registered, for the tests of derivation from a chat template and of the anchored reader.

Each family has its own chat template (``tests/data/invented/<family>.jinja``, written for these tests; kept out of the
library's examples and rows) and a writer here that writes calls as a model of that family would answer (the
template's layout, after its generation prompt). :func:`outputs` gives, per family, the answers with calls (valid,
parallel, typed and nested values, after prose, after reasoning) with the calls they hold, the answers without calls
(prose, prose naming the tools and their parameters) and broken answers (cut, closers lost) with the calls written
whole before the break.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refiner.calls import ToolCall

HERE = Path(__file__).resolve().parent / "data" / "invented"

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast for a city",
     "parameters": {"type": "object", "properties": {
         "city": {"type": "string"}, "days": {"type": "integer"},
         "units": {"type": "string", "enum": ["metric", "imperial"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search_flights", "description": "Find flights",
     "parameters": {"type": "object", "properties": {
         "origin": {"type": "string"}, "destination": {"type": "string"}, "date": {"type": "string"},
         "passengers": {"type": "integer"}, "nonstop": {"type": "boolean"}},
         "required": ["origin", "destination", "date"]}}},
    {"type": "function", "function": {"name": "create_event", "description": "Create a calendar event",
     "parameters": {"type": "object", "properties": {
         "title": {"type": "string"}, "attendees": {"type": "array", "items": {"type": "string"}},
         "details": {"type": "object"}, "priority": {"type": "number"}}, "required": ["title"]}}},
    {"type": "function", "function": {"name": "set_zip", "description": "Set the user's postal code",
     "parameters": {"type": "object", "properties": {
         "zip": {"type": "string"}, "note": {"type": "string"}}, "required": ["zip"]}}},
]

C = ToolCall
CALL_CASES: list[tuple[str, list[ToolCall]]] = [
    ("one string", [C("get_weather", {"city": "Paris"})]),
    ("two args", [C("get_weather", {"city": "Paris", "days": 3})]),
    ("three args", [C("get_weather", {"city": "Oslo", "days": 5, "units": "metric"})]),
    ("five typed", [C("search_flights", {"origin": "New York", "destination": "London", "date": "2025-03-14",
                                          "passengers": 2, "nonstop": True})]),
    ("parallel two", [C("get_weather", {"city": "Paris"}), C("get_weather", {"city": "Rome", "days": 2})]),
    ("parallel three", [C("get_weather", {"city": "Berlin"}),
                        C("search_flights", {"origin": "Berlin", "destination": "Madrid", "date": "2025-05-01"}),
                        C("set_zip", {"zip": "10115", "note": "home"})]),
    ("nested", [C("create_event", {"title": "Team sync", "attendees": ["ana@example.org", "bo@example.org"],
                                    "details": {"room": "4B", "video": True, "slots": [9, 10]}, "priority": 0.5})]),
    ("unicode and punctuation", [C("get_weather", {"city": "São Paulo, Brasil", "units": "metric"})]),
    ("number-like string", [C("set_zip", {"zip": "94105", "note": "office"})]),
    ("parallel typed", [C("create_event", {"title": "Lunch", "attendees": ["cy@example.org"], "priority": 2}),
                        C("get_weather", {"city": "Lima", "days": 1})]),
]
PROSE = [
    "The capital of France is Paris.",
    "I could call get_weather with city Paris and days 3, but you did not ask for a forecast.",
    "To use get_weather, give me a city: Paris or Rome? And days: how many?",
]


@dataclass(frozen=True)
class Family:
    name: str
    write: Callable[[list[ToolCall]], str]
    think: tuple[str, str]  # how the family writes reasoning before its answer

    @property
    def template(self) -> Path:
        return HERE / f"{self.name}.jinja"


def _raw(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _actfn(calls: list[ToolCall]) -> str:
    body = "".join(f'<act:call fn="{c.name}">\n' + "".join(f'<act:arg key="{k}">{_raw(v)}</act:arg>\n'
                                                         for k, v in c.arguments.items()) + "</act:call>\n"
                   for c in calls)
    return f"<act:calls>\n{body}</act:calls>"


def _walrus(calls: list[ToolCall]) -> str:
    return "".join(f"[[CALL {c.name}]]\n" + "".join(f"{k} := {json.dumps(v, ensure_ascii=False)}\n"
                                                    for k, v in c.arguments.items()) + "[[/CALL]]\n" for c in calls)


def _atat(calls: list[ToolCall]) -> str:
    return "\n\n".join(f"@@tool {c.name}\n" + "".join(f"-- {k}: {_raw(v)}\n" for k, v in c.arguments.items())
                       + "@@done" for c in calls)


def _opsjson(calls: list[ToolCall]) -> str:
    return "%%OPS%%" + " ;; ".join(json.dumps({"op": c.name, "with": dict(c.arguments), "ref": f"r{i}"},
                                              ensure_ascii=False) for i, c in enumerate(calls)) + "%%/OPS%%"


def _tilde(calls: list[ToolCall]) -> str:
    return "ACTIONS:\n" + "".join(f"~~{c.name}~~ {json.dumps(dict(c.arguments), ensure_ascii=False)}\n"
                                  for c in calls) + "END ACTIONS"


def _quill(calls: list[ToolCall]) -> str:
    def value(v: Any) -> str:
        return f'~"{v}"~' if isinstance(v, str) else json.dumps(v, ensure_ascii=False)

    return "\n".join(f"<<run {c.name}>> " + " ;; ".join(f"{k} => {value(v)}" for k, v in c.arguments.items())
                     + " <</run>>" for c in calls)


def _idcall(calls: list[ToolCall]) -> str:
    return "::calls::\n" + "".join(f">> {c.name} @call_{i:x}{7 * i + 3} :: "
                                    f"{json.dumps(dict(c.arguments), ensure_ascii=False)}\n"
                                    for i, c in enumerate(calls)) + "::end::"


def _wrapped(calls: list[ToolCall]) -> str:
    return "<plan>\n" + "".join(json.dumps({"kind": "call", "step": {"tool": c.name, "input": dict(c.arguments)},
                                            "ref": f"r-{i}"}, ensure_ascii=False) + "\n"
                                for i, c in enumerate(calls)) + "</plan>"


def _sexpr(calls: list[ToolCall]) -> str:
    return "(calls\n" + "".join(f"  (call {c.name}" + "".join(f" :{k} {json.dumps(v, ensure_ascii=False)}"
                                                             for k, v in c.arguments.items()) + ")\n"
                                 for c in calls) + ")"


def _fence(calls: list[ToolCall]) -> str:
    return "".join(f"\n```call {c.name}\n" + "".join(f"{k}: {json.dumps(v, ensure_ascii=False)}\n"
                                                     for k, v in c.arguments.items()) + "```" for c in calls)


FAMILIES = [
    Family("actfn", _actfn, ("[[think]]", "[[/think]]\n")),
    Family("walrus", _walrus, ("", "")),
    Family("atat", _atat, ("(thinking) ", " (/thinking)\n")),
    Family("opsjson", _opsjson, ("", "")),
    Family("tilde", _tilde, ("<reflect>", "</reflect>\n")),
    Family("quill", _quill, ("<<muse>>", "<</muse>>\n")),  # a quote token around strings, keys bare
    Family("idcall", _idcall, ("{{ponder}}", "{{/ponder}}\n")),  # the call id between the name and the arguments
    Family("wrapped", _wrapped, ("", "")),  # each call object under a key of an outer object
    Family("sexpr", _sexpr, ("#|", "|#\n")),  # keys written :key inside a parenthesised form
    Family("fence", _fence, ("<!--think ", " -->\n")),  # a markdown fence labelled with the call
]


@dataclass(frozen=True)
class Output:
    family: str
    case: str
    text: str
    calls: tuple[ToolCall, ...]  # the calls it holds (broken: those written whole before the break)
    kind: str  # "call", "prose" or "broken"


def outputs(fam: Family) -> list[Output]:
    out = [Output(fam.name, case, fam.write(calls), tuple(calls), "call") for case, calls in CALL_CASES]
    first = CALL_CASES[4][1]
    out.append(Output(fam.name, "after prose", "Let me look that up for you.\n" + fam.write(first), tuple(first),
                      "call"))
    if fam.think[0]:
        out.append(Output(fam.name, "after reasoning", fam.think[0] + "The user wants the weather in Paris."
                          + fam.think[1] + fam.write(first[:1]), tuple(first[:1]), "call"))
    out += [Output(fam.name, f"prose {i}", text, (), "prose") for i, text in enumerate(PROSE)]
    two = CALL_CASES[5][1]
    full = fam.write(two)
    second = full.find(two[1].name)
    out.append(Output(fam.name, "cut mid-value", full[: second + len(two[1].name) + 22], tuple(two[:1]), "broken"))
    out.append(Output(fam.name, "cut after a call", fam.write(two[:1])[:-3], (), "broken"))
    return out


def _norm(calls: Any) -> list[tuple[str, str]]:
    out = []
    for c in calls or ():
        name, args = (c["name"], c.get("arguments", {})) if isinstance(c, dict) else (c.name, c.arguments)
        out.append((name, json.dumps(args, sort_keys=True, ensure_ascii=False)))
    return out


def invented(got: Any, meant: tuple[ToolCall, ...], intended: tuple[ToolCall, ...] = ()) -> int:
    """How many calls of ``got`` the text does not hold: a call that is none of ``meant`` and no part (the same name,
    some of its arguments with the same values) of a call the text was writing (``intended``)."""
    ok = {(n, a) for n, a in _norm(meant)}
    parts = [(c.name, dict(c.arguments)) for c in (*meant, *intended)]
    n = 0
    for c in got or ():
        name, args = (c["name"], c.get("arguments", {})) if isinstance(c, dict) else (c.name, dict(c.arguments))
        if (name, json.dumps(args, sort_keys=True, ensure_ascii=False)) in ok:
            continue
        if any(name == pn and all(k in pa and pa[k] == v for k, v in args.items()) for pn, pa in parts):
            continue
        n += 1
    return n


def measure(fam: Family, with_template: bool) -> dict[str, Any]:
    """Reads every output of ``fam`` through ``Refiner().refine`` (tier 1, no model, the tools offered): with the
    family's chat template (``Refiner(chat_template=...)``) or without (the format detected). ``exact``: call outputs
    whose calls equal the ones meant; ``invented``: calls returned that the text does not hold (any output)."""
    from refiner.pipeline import Refiner

    ref = Refiner(chat_template=fam.template) if with_template else Refiner()
    exact = total = made_up = from_prose = 0
    misses = []
    intended = {o.case: o for o in outputs(fam)}
    for o in outputs(fam):
        got = ref.refine({"upstream": o.text, "tools": TOOLS})["calls"]
        full = tuple(c for case, calls in CALL_CASES if case == "parallel three" for c in calls)
        bad = invented(got, o.calls, full if o.kind == "broken" else ())
        made_up += bad
        if o.kind == "prose":
            from_prose += len(got or ())
        if o.kind == "call":
            total += 1
            if _norm(got) == _norm(o.calls):
                exact += 1
            else:
                misses.append((o.case, got))
    del intended
    return {"family": fam.name, "exact": exact, "calls_outputs": total, "invented": made_up,
            "from_prose": from_prose, "format": ref.fmt, "misses": misses}
