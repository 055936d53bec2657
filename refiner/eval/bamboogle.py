"""Bamboogle* (paper Table 4), rebuilt from the paper's description: a birth-information tool, then the tool that
answers the question, in one of three output formats per sample (see docs/evaluation.md)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from refiner import formats
from refiner.calls import ToolCall, calls_equal
from refiner.eval.common import BenchItem, Benchmark, Retagged, default_data_dir, read_records, spread

FOUNDATION = {
    "birthplace": ("find_birthplace", "Returns the birthplace of a celebrity.", "output_birthplace"),
    "birthdate": ("find_birthdate", "Returns the full birth date of a celebrity.", "output_birthdate"),
    "birthyear": ("find_birthyear", "Returns the year a celebrity was born.", "output_birthyear"),
}

# name, info type, tool description, question template
TASKS: tuple[tuple[str, str, str, str], ...] = (
    ("find_capital", "birthplace", "Returns the capital of the country of a place.",
     "What is the capital of the country where {p} was born?"),
    ("find_currency", "birthplace", "Returns the currency used in the country of a place.",
     "Which currency is used in the country where {p} was born?"),
    ("find_calling_code", "birthplace", "Returns the international calling code of the country of a place.",
     "What is the calling code of the country where {p} was born?"),
    ("find_top_level_domain", "birthplace", "Returns the internet country-code top-level domain of a place.",
     "What is the top-level domain of the country {p} was born in?"),
    ("find_latitude", "birthplace", "Returns the rounded latitude of a place.",
     "What is the rounded latitude of the birthplace of {p}?"),
    ("find_longitude", "birthplace", "Returns the rounded longitude of a place.",
     "What is the rounded longitude of the birthplace of {p}?"),
    ("find_official_language", "birthplace", "Returns the official language of the country of a place.",
     "What is the official language of the country where {p} was born?"),
    ("find_continent", "birthplace", "Returns the continent a place lies on.",
     "On which continent was {p} born?"),
    ("find_population", "birthplace", "Returns the current population of the country of a place.",
     "How many people live in the country where {p} was born?"),
    ("find_us_president", "birthyear", "Returns who was president of the United States in a given year.",
     "Who was the US president in the year {p} was born?"),
    ("find_nobel_literature_laureate", "birthyear", "Returns the winner of the Nobel Prize in Literature in a year.",
     "Who won the Nobel Prize in Literature in the year {p} was born?"),
    ("find_masters_champion", "birthyear", "Returns the winner of the Masters golf tournament in a year.",
     "Who won the Masters Tournament in the year {p} was born?"),
    ("find_best_picture", "birthyear", "Returns the film that won the Academy Award for Best Picture in a year.",
     "Which film won Best Picture at the Oscars in the year {p} was born?"),
    ("find_olympic_host", "birthyear", "Returns the host city of the Summer Olympics held closest to a year.",
     "Which city hosted the Summer Olympics closest to the year {p} was born?"),
    ("find_chinese_zodiac", "birthyear", "Returns the Chinese zodiac animal of a year.",
     "What is the Chinese zodiac animal of the year {p} was born?"),
    ("find_day_of_week", "birthdate", "Returns the day of the week of a date.",
     "On what day of the week was {p} born?"),
    ("find_zodiac_sign", "birthdate", "Returns the western zodiac sign of a date.",
     "What is the zodiac sign of {p}, going by the birth date?"),
)

OUTPUT_FORMATS = {
    "tool_call": ('<tool_call>[{"name": "tool_name1", "arguments": {"parameter_name1": "parameter_content1"}}, '
                  '{"name": "tool_name2", "arguments": {...}}]</tool_call>'),
    "pythonic": "[tool_name1(parameter_name1=parameter_value1, parameter_name2=parameter_value2), tool_name2(...)]",
    "tool_use": ('[{"type": "tool_use", "name": "tool_name1", "input": {"parameter_name1": "parameter_content1"}}, '
                 '{"type": "tool_use", "name": "tool_name2", "input": {...}}]'),
}
# How each output format is read and written: a wire format, re-tagged where the task's tags differ.
ANSWER_FORMATS = {
    "tool_call": Retagged("xlam", ("<tool_call>", "</tool_call>")),
    "pythonic": Retagged("toolace", None),  # the bare list, without ToolACE's <function_list> tags
    "tool_use": Retagged("anthropic"),
}

SYSTEM_TEMPLATE = (
    "You answer questions about celebrities by calling tools. First look up the person's birth information with a "
    "foundational tool, then call the tool that answers the question, passing the foundational tool's output name "
    "(a code starting with 'output_') as information_content.\nAvailable tools:\n{tools}\n\n"
    "Answer only with the tool calls, in exactly this format:\n{fmt}"
)


def tool_specs() -> list[dict]:
    specs = [
        {"name": name, "description": desc,
         "parameters": {"type": "object", "properties": {"celebrity_name": {
             "type": "string", "description": "One of the input parameters: the name of the celebrity."}},
             "required": ["celebrity_name"]},
         "output_name": out}
        for name, desc, out in FOUNDATION.values()
    ]
    for name, _info, desc, _q in TASKS:
        specs.append({
            "name": name, "description": desc,
            "parameters": {"type": "object", "properties": {
                "information_type": {"type": "string", "enum": list(FOUNDATION),
                                     "description": "The kind of information given: 'birthplace', 'birthdate' or "
                                                    "'birthyear'."},
                "information_content": {"type": "string",
                                        "description": "The information itself; may be an output code starting "
                                                       "with 'output_'."}},
                "required": ["information_type", "information_content"]},
            "output_name": "output_" + name.removeprefix("find_"),
        })
    return specs


def gold_for(person: str, task: tuple[str, str, str, str]) -> list[ToolCall]:
    name, info, _desc, _q = task
    f_name, _f_desc, f_out = FOUNDATION[info]
    return [ToolCall(f_name, {"celebrity_name": person}),
            ToolCall(name, {"information_type": info, "information_content": f_out})]


_PERSON = re.compile(r"^[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,4}$")


def people(records: Sequence[dict], where: str) -> list[str]:
    """Distinct answers of the "Who ..." questions that read as a name (capitalised words, no digits)."""
    out: list[str] = []
    for i, r in enumerate(records):
        q, a = r.get("Question"), r.get("Answer")
        if not isinstance(q, str) or not isinstance(a, str):
            raise ValueError(f"{where} record {i}: fields 'Question' and 'Answer' must be strings")
        name = " ".join(w[:1].upper() + w[1:] for w in a.strip().split())
        if q.strip().lower().startswith("who") and _PERSON.match(name) and name not in out:
            out.append(name)
    return out


def parse_any(text: str) -> list[ToolCall]:
    """Calls read leniently in any registered format: the first reading with calls, or a later clean one with as
    many or more."""
    best: list[ToolCall] = []
    for fmt in formats.all_formats():
        got = fmt.parse_lenient(text)
        if got.calls and (not best or (got.ok and len(got.calls) >= len(best))):
            best = got.calls
            if got.ok:
                break
    return best


class BamboogleStar(Benchmark):
    name = "bamboogle"
    title = "Bamboogle* (Table 4)"
    metrics = ("acc_full", "acc_toolname", "acc_parameter")

    def __init__(self, data_dir: Path | None = None, seed: int = 0) -> None:
        super().__init__()
        self.path = Path(data_dir or default_data_dir()) / "bamboogle" / "data.json"
        self.seed = seed

    def load(self, limit: int | None = None) -> list[BenchItem]:
        persons = people(read_records(self.path, "Bamboogle data"), str(self.path))
        specs = tool_specs()
        tools_json = json.dumps(specs, ensure_ascii=False)
        pairs = [(p, t) for p in persons for t in TASKS]
        random.Random(self.seed).shuffle(pairs)
        out = []
        for k, (person, task) in enumerate(spread(pairs, limit)):
            ofmt = random.Random(f"{self.seed}-{person}-{task[0]}").choice(list(OUTPUT_FORMATS))
            system = SYSTEM_TEMPLATE.format(tools=tools_json, fmt=OUTPUT_FORMATS[ofmt])
            question = task[3].format(p=person)
            out.append(BenchItem(
                f"bamboogle-{task[0]}-{person.replace(' ', '_')}", self.name, ofmt, system, question, tools=specs,
                fmt=ANSWER_FORMATS[ofmt].wire, gold=gold_for(person, task),
                meta={"output_format": ofmt, "format_hint": f"Answer in exactly this format: {OUTPUT_FORMATS[ofmt]}"},
            ))
        return out

    def answer_format(self, item: BenchItem) -> Retagged:
        return ANSWER_FORMATS[item.meta["output_format"]]

    def score(self, item: BenchItem, text: str) -> dict[str, float]:
        gold = item.gold
        strict = self.read(item, text)
        full = strict is not None and calls_equal(strict, gold, ordered=True)
        calls = parse_any(text)
        names_ok = Counter(c.name for c in calls) == Counter(c.name for c in gold)
        params_ok = calls_equal(calls, gold, ordered=False)
        return {"acc_full": float(full), "acc_toolname": float(names_ok), "acc_parameter": float(params_ok)}
