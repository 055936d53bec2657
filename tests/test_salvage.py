"""The salvage reader (refiner/formats/salvage.py) and its hook in a request's reading (reading.salvaged): calls are read
wherever a model put them, never made of prose, within counted bounds."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import salvage as salvage_mod
from refiner.formats.reading import Reading, read_text, salvaged, tool_index
from refiner.formats.salvage import salvage
from refiner.gate import check_reading, check_text
from refiner.pipeline import Refiner
from refiner.specs import load_tools

TOOLS = [
    {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}},
    {"name": "get_time", "description": "Time.", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}, "required": ["city"]}},
    {"name": "math.factorial", "description": "n!", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}}, "required": ["n"]}},
    {"name": "roll_dice", "description": "A die.", "parameters": {"type": "object", "properties": {
        "sides": {"type": "integer"}}}},
]
OFFERED = {t["name"]: list(t["parameters"]["properties"]) for t in TOOLS}
P = ToolCall("get_weather", {"city": "Paris"})
T = ToolCall("get_time", {"city": "Paris"})


def read(text: str, offered=OFFERED) -> list[ToolCall]:
    return salvage(text, offered).calls


SHAPES = {
    "list then prose": ('[get_weather(city="Paris")]\nThis fetches it.', [P]),
    "prose then list": ("Sure! Here's the call: [get_weather(city='Paris'), get_time(city='Paris')]", [P, T]),
    "lists on lines": ('[get_weather(city="Paris")]\n[get_time(city="Paris")]', [P, T]),
    "bare lines": ('get_weather(city="Paris")\nget_time(city="Paris")', [P, T]),
    "semicolons": ('get_weather(city="Paris");get_time(city="Paris");', [P, T]),
    "python fence": ('```python\n[get_weather(city="Paris")]\n```', [P]),
    "plain fence": ('```\nget_weather(city="Paris")\n```\nDone.', [P]),
    "indented": ('Calls:\n\n    get_weather(city="Paris")\n    get_time(city="Paris")\n', [P, T]),
    "return in code": ('```python\ndef f():\n    return [get_weather(city="Paris"),\n            get_time(city="Paris")]\n```',
                       [P, T]),
    "assignment in code": ("```python\nimport json\nw = get_weather(city='Paris')\nprint(json.dumps(w))\n```", [P]),
    "json fence": ('```json\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]\n```', [P]),
    "single quotes, parameters": ("{'name': 'get_weather', 'parameters': {'city': 'Paris'}}", [P]),
    "python literals in a dict": ("{'name': 'get_weather', 'parameters': {'city': 'Paris', 'unit': None}}",
                                  [ToolCall("get_weather", {"city": "Paris", "unit": None})]),
    "arguments as JSON text": ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}', [P]),
    "function key": ("{'function': {'name': 'get_weather', 'arguments': {'city': 'Paris'}}}", [P]),
    "broken json": ('{"name": "get_weather", "arguments": {"city": "Paris",}}', [P]),
    "hermes blocks": (('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
                       '<tool_call>\n{"name": "get_time", "arguments": {"city": "Paris"}}\n</tool_call>'), [P, T]),
    "pythonic inside a hermes block": ('<tool_call>[get_weather(city="Paris")]</tool_call>', [P]),
    "quoted call strings": ("['get_weather(city=\"Paris\")', 'get_time(city=\"Paris\")']", [P, T]),
    "JSON list of call strings": ('["get_weather(city=\\"Paris\\")"]', [P]),
    "markdown escapes": ('[get\\_weather(city="Paris"), get\\_time(city\\_x="Paris")]',
                         [P, ToolCall("get_time", {"city_x": "Paris"})]),
    "bullets": ('Plan:\n- get_weather(city="Paris")\n- get_time(city="Paris")', [P, T]),
    "numbered inline code": ('1. `get_weather(city="Paris")`\n2. `get_time(city="Paris")`', [P, T]),
    "special tokens": ('<|python_tag|>get_weather(city="Paris")<|eom_id|>', [P]),
    "namespace prefix": ('functions.get_weather(city="Paris")', [P]),
    "dotted name": ("Answer: math.factorial(n=5)", [ToolCall("math.factorial", {"n": 5})]),
    "json-isms in pythonic": ('[get_weather(city="Paris", unit=null)]',
                              [ToolCall("get_weather", {"city": "Paris", "unit": None})]),
    "positional literals": ('[get_weather("Paris", "celsius")]',
                            [ToolCall("get_weather", {"city": "Paris", "unit": "celsius"})]),
    "positional then keyword": ('[get_weather("Paris", unit="celsius")]',
                                [ToolCall("get_weather", {"city": "Paris", "unit": "celsius"})]),
    "keyword argument": ('[get_time(city="Paris", **{"from": "x"})]',
                         [ToolCall("get_time", {"city": "Paris", "from": "x"})]),
    "zero-argument call in a list": ("[roll_dice()]", [ToolCall("roll_dice", {})]),
    "reasoning ignored": ("<think>get_weather(city='Rome')?</think>\n[get_weather(city='Paris')]", [P]),
    "loose call in a sentence": ("I will call get_weather(city='Paris') now.", [P]),
    "another spelling": ("[getWeather(city='Paris')]", [ToolCall("getWeather", {"city": "Paris"})]),
    "openai message": (('{"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": '
                        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]}'), [P]),
    "anthropic blocks": (('[{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t", "name": "get_weather", '
                          '"input": {"city": "Paris"}}]'), [P]),
    # shapes real models answer in
    "BFCL answer shape": ('{"get_weather": {"city": "Paris"}}', [P]),
    "BFCL answer list": ('[{"get_weather": {"city": "Paris"}}, {"get_time": {"city": "Paris"}}]', [P, T]),
    "keyed objects, one per key": ('```json\n{"get_weather": {"city": "Paris"}, "get_time": {"city": "Paris"}}\n```',
                                   [P, T]),
    "python tuple pair": ("('get_weather', {'city': 'Paris'})", [P]),
    "JSON pairs": ('[["get_weather", {"city": "Paris"}], ["get_time", {"city": "Paris"}]]', [P, T]),
    "tuples in a list": ("Calls: [('get_weather', {'city': 'Paris'}), ('get_time', {'city': 'Paris'})]", [P, T]),
    "concatenated lists": ('[get_weather(city="Paris")] + [get_time(city="Paris")]', [P, T]),
    "concatenated, no spaces": ('[get_weather(city="Paris")]+[get_time(city="Paris")]', [P, T]),
    "escaped parameter in JSON": ('{"name": "get_weather", "arguments": {"city": "Paris", "u\\_nit": "c"}}',
                                  [ToolCall("get_weather", {"city": "Paris", "u\\_nit": "c"})]),
    "unicode and brackets in values": ('[get_weather(city="Zürich ]) (x")]\nok', [ToolCall("get_weather", {
        "city": "Zürich ]) (x"})]),
}


@pytest.mark.parametrize("text,want", list(SHAPES.values()), ids=list(SHAPES))
def test_reads_calls_wherever_they_are(text, want):
    assert read(text) == want


TALK = {
    "decline": "I'm sorry, none of the available functions can do that.",
    "ask back": "Which city should I use for get_weather?",
    "mention": "You could use get_weather to check the forecast.",
    "signature": "The function get_weather(city, unit) returns the forecast.",
    "signature in a fence": "```python\nget_weather(city, unit)\n```\nTell me the city.",
    "placeholder": "Call get_weather(city=...) with your city.",
    "angle placeholder": "Use get_weather(city=<city>) here.",
    "zero-argument mention": "get_time() needs a city - which one?",
    "quoted spec": 'I have {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object", '
                   '"properties": {"city": {"type": "string"}}}}. What city?',
    "python spec": "{'name': 'get_weather', 'parameters': {'type': 'object', 'properties': {'city': {}}}}",
    "arguments only": 'It returned {"city": "Paris", "temp": 21}.',
    "names in a list": "Available: [get_weather, get_time].",
    "def line": "```python\ndef get_weather(city: str) -> dict: ...\n```",
    "prose parentheses": "Paris (France) is sunny (mostly).",
    "code calls to other names": "```python\nimport json\nprint(json.dumps({'a': 1}))\n```",
    "unclosed in prose": "Try get_weather(city='Paris' sometime",
    # gpt-oss's final channel is the answer (vLLM's harmony parser returns it as content), whatever it holds
    "gpt-oss final channel": ('<|channel|>analysis<|message|>Quote it.<|end|><|start|>assistant<|channel|>final'
                              '<|message|>{"name": "get_weather", "arguments": {"city": "Paris"}}<|return|>'),
    "gpt-oss final pythonic": '<|channel|>final<|message|>[get_weather(city="Paris")]',
    # a keyed object or a pair whose name is no offered tool is data
    "keyed data": 'The record is {"user": {"id": 1, "city": "Paris"}}.',
    "keyed data alone": '{"weather": {"city": "Paris"}}',
    "pair of data": '["user", {"id": 1}]',
    "sum in prose": "Compute [1, 2] + [3] with get_weather? No.",
}


@pytest.mark.parametrize("text", list(TALK.values()), ids=list(TALK))
def test_no_call_is_made_of_prose(text):
    assert read(text) == []


def test_without_tools_only_structured_calls_count():
    assert read("[lookup(term='x')]\nok", None) == [ToolCall("lookup", {"term": "x"})]
    assert read("lookup(term='x')", None) == [ToolCall("lookup", {"term": "x"})]
    assert read("I would call lookup(term='x') later.", None) == []
    assert read("As a rule f(x) grows faster than g(y).", None) == []
    assert read("[lookup('x')]", None) == [ToolCall("lookup", {})]  # a value no parameter takes is dropped
    assert read("```python\nprint('hello')\n```", None) == []  # code, not a call
    assert read('{"name": "lookup", "term": "x"}', None) == [ToolCall("lookup", {"term": "x"})]
    assert read('It returned {"name": "Paris", "country": "FR"}.', None) == []


def test_a_name_that_is_not_offered_counts_in_a_list_only():
    assert read("[search(q='x')]") == [ToolCall("search", {"q": "x"})]
    assert read("search(q='x')") == []
    assert read("Let me search(q='x').") == []
    assert read("```python\nlogging.basicConfig(level=10)\nget_weather(city='Paris')\n```") == [P]


def test_structured_calls_win_over_calls_in_prose():
    got = salvage("First get_time(city='Paris') maybe.\n[get_weather(city='Paris')]", OFFERED)
    assert got.calls == [P] and any("prose" in n for n in got.notes)


def test_a_restated_call_counts_once_but_repeats_in_one_list_are_kept():
    assert read("I'll call get_weather(city='Paris').\n\n[get_weather(city='Paris')]") == [P]
    assert read("```\n[get_weather(city='Paris')]\n```\nFinal: [get_weather(city='Paris')]") == [P]
    assert read("[roll_dice(sides=6), roll_dice(sides=6)]") == [ToolCall("roll_dice", {"sides": 6})] * 2


def test_positional_values_that_do_not_fit_are_dropped_in_a_list_and_unreadable_elsewhere():
    assert read("[get_time('Paris', 'extra')]") == [ToolCall("get_time", {})]  # get_time has one parameter
    assert read("[get_weather('Paris', city='Rome')]") == [ToolCall("get_weather", {"city": "Rome"})]  # twice
    assert read("get_time('Paris', 'extra')") == []


def test_values_inside_a_call_are_part_of_it():
    assert read("[get_weather(city={'name': 'get_time', 'arguments': {}})]") == [
        ToolCall("get_weather", {"city": {"name": "get_time", "arguments": {}}})]
    # a call as a value (a composition no call list holds) is no value: the argument is left out, never guessed
    assert read("[get_weather(city=get_time(city='Paris'))]") == [ToolCall("get_weather", {})]


def test_a_call_cut_by_the_end_of_the_text_is_left_out():
    """As tier 1 leaves out the call a text stops inside: never presented as complete, no value invented."""
    assert read("[get_time(city='Paris'), get_weather(unit='celsius', city='Par") == [T]
    assert read("I'll call get_weather(city='Par") == []  # cut in prose: nothing


def test_a_format_read_call_cut_mid_value_is_left_out():
    """A registered format's reading of a text that stops mid-value: the complete calls, never the cut one."""
    got = salvage('Sure.\n<longcat_tool_call>\n{"name": "get_time", "arguments": {"city": "Paris"}}\n'
                  '</longcat_tool_call>\n<longcat_tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
                  OFFERED)
    assert got.calls == [T]


def test_a_line_start_marker_counts_on_the_first_line():
    """Functionary's ``>>>`` marks a call at a line start; the text's first line is one (a cut second call written
    right after the first's JSON leaves the first call read, not the whole text taken for prose)."""
    text = '>>>get_time\n{"city": "Paris"}>>>get_weather\n{"city": "To'
    got = salvage(text, OFFERED)
    assert got.calls == [T] and "functionary_v32" in got.describe()
    lenient = check_text(text, "functionary_v32", load_tools(TOOLS)).calls
    reading = Reading(text, "functionary_v32", lenient)
    assert salvaged(reading, load_tools(TOOLS)) is reading  # the format's own reading stands


def test_describe_and_format():
    got = salvage("Here:\n```python\nget_weather(city='Paris')\n```\n<tool_call>\n"
                  '{"name": "get_time", "arguments": {"city": "Paris"}}\n</tool_call>', OFFERED)
    assert got.calls == [P, T]
    assert "pythonic call in a code fence (line 3)" in got.describe()
    assert "<tool_call> block (hermes)" in got.describe()
    assert got.fmt == "toolace" and got.complete
    assert salvage("nothing here").describe() == "no call"


@pytest.mark.parametrize("fmt", formats.all_formats(), ids=formats.names())
@pytest.mark.parametrize("noise", ["before", "after", "fence"])
def test_every_registered_format_is_read_inside_noise(fmt, noise):
    """Each format's own example with prose around it or inside a code fence: salvage reads the calls the format's
    strict parser reads from the example (so a format added to the registry is covered)."""
    text = {"before": f"Sure, here you go:\n{fmt.example}", "after": f"{fmt.example}\n\nAnything else?",
            "fence": f"Here:\n```\n{fmt.example}\n```\nDone."}[noise]
    assert salvage(text).calls == fmt.parse_strict(fmt.example)


HOSTILE = {
    "call storm": "get_weather(" * 60_000,
    "list storm": "[get_weather(city=" * 20_000,
    "brace storm": "{" * 200_000,
    "objects": '{"name": "get_weather", "arguments": {"city": "x"}} ' * 4_000,
    "quote storm": "'\"" * 100_000,
    "valid calls": "get_weather(city='Paris')\n" * 8_000,
    "tag storm": "<tool_call>" * 18_000,
    "fence storm": "```" * 66_000,
    "dotted chain": "a." * 100_000 + "(",
    "one word": "x" * 200_000,
    "spaced words": "[" + "a " * 100_000 + "b(",
    "unclosed object": '{"name": "get_weather", "arguments": {"city": "' + "y" * 200_000,
    "deep object": '{"a": ' * 30_000 + "1" + "}" * 30_000,
    "unclosed call": "get_weather(city='" + "p" * 200_000,
    "escapes": "\\_" * 100_000,
    "bracket pairs": "[]{}" * 50_000,
    "commas in braces": "{" + "," * 200_000,
    "over the limit": "[get_weather(city='Paris')] " + "z" * 300_000,
}


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_inputs_are_read_within_counted_bounds(text):
    got = salvage(text, OFFERED)
    assert len(got.calls) <= salvage_mod.MAX_CALLS and len(got.sites) <= salvage_mod.MAX_SITES
    assert got.work["candidates"] <= salvage_mod.MAX_CANDIDATES
    assert got.work["scanned"] <= salvage_mod.SCAN_BUDGET + salvage_mod.MAX_CALL_CHARS
    assert got.work["marks"] <= salvage_mod.MARK_BUDGET
    assert got.work["parsed"] <= salvage_mod.AST_BUDGET + salvage_mod.MAX_CALL_CHARS + 8
    assert all(c.name == "get_weather" for c in got.calls)


def test_hostile_inputs_through_the_pipeline_never_raise():
    refiner = Refiner()
    for text in (HOSTILE["call storm"], HOSTILE["objects"], HOSTILE["over the limit"]):
        res = refiner.refine({"upstream": text, "tools": TOOLS, "format": "toolace"})
        assert res["stage"] in ("unchanged", "repaired")


def test_a_bound_reached_leaves_the_reading_incomplete():
    got = salvage("(x) " * 10 + "f(q) " * 300 + "[get_weather(city='Paris')]", OFFERED)
    assert not got.complete and any("gave up" in n for n in got.notes)
    assert salvage("[get_weather(city='Paris')]", OFFERED).complete


# ----------------------------------------------------------------------------------------------------------------
# The hook


INDEX = tool_index(load_tools(TOOLS))


def salvage_report(text, fmt, tools):
    """The gate on ``text`` read in ``fmt``, by salvage when that reading is the better one."""
    return check_reading(salvaged(read_text(text, fmt, tools), tools), tools)


def test_a_valid_text_is_never_re_read():
    text = "<function_list>[get_weather(city='Paris')]</function_list>\nAlso [get_time(city='Paris')]"
    reading = read_text(text, "toolace", INDEX)
    assert reading.strict_ok and salvaged(reading, INDEX) is reading


def test_a_lenient_reading_as_good_as_salvages_is_kept():
    text = "[get_weather(city='Paris')]\nDone."
    report = check_text(text, "toolace", INDEX)
    reading = Reading(text, "toolace", report.calls)
    assert report.calls == [P] and salvaged(reading, INDEX) is reading


def test_salvage_replaces_a_reading_with_fewer_calls_and_says_where():
    text = "Sure! Here are the calls: [get_weather(city='Paris'), get_time(city='Paris')]"
    assert len(check_text(text, "toolace", INDEX).calls) < 2  # (the lenient reader takes no call from the sentence)
    report = salvage_report(text, "toolace", INDEX)
    assert report.calls == [P, T] and report.salvaged is not None
    assert [d.code for d in report.diagnostics] == ["format"]
    assert "after prose (line 1)" in report.salvaged.describe()


def test_calls_made_of_prose_give_way_to_none():
    text = "You could use get_weather(city) once you know the city."
    report = check_text(text, "toolace", INDEX)
    assert report.calls  # the format's lenient reader made a call of the sentence
    out = salvage_report(text, "toolace", INDEX)
    assert out.calls == [] and {d.code for d in out.diagnostics} == {"format", "no_calls"}


def test_an_incomplete_salvage_never_drops_the_lenient_reading():
    text = "f(q) " * 300 + "[get_weather(city='Paris')]"
    lenient = [P]
    assert not salvage(text, {n: list(s.params) for n, s in INDEX.items()}).complete
    reading = Reading(text, "toolace", lenient)
    assert salvaged(reading, INDEX) is reading


def test_pipeline_reads_salvaged_calls_in_the_requested_format():
    refiner = Refiner()
    res = refiner.refine({"upstream": "```python\nget_weather(city='Paris')\n```", "tools": TOOLS, "format": "hermes"})
    assert res["stage"] == "repaired" and formats.get("hermes").parse_strict(res["refined"]) == [P]
    assert [a["code"] for a in res["actions"]][:1] == ["salvage"]
    res = refiner.refine({"upstream": "Sorry, which city?", "tools": TOOLS, "format": "toolace"})
    assert res["calls"] == [] and res["stage"] == "unchanged" and res["refined"] == "Sorry, which city?"


def test_pipeline_with_nothing_asked_or_detected_answers_in_the_dialect_found():
    res = Refiner().refine({"upstream": "Here:\n```python\nget_weather(city='Paris')\n```", "tools": TOOLS})
    assert res["format"] == "toolace" and formats.get("toolace").parse_strict(res["refined"]) == [P]
    res = Refiner().refine({"upstream": "Calling it: {'name': 'get_weather', 'arguments': {'city': 'Paris'}}",
                            "tools": TOOLS})
    assert [c["name"] for c in res["calls"]] == ["get_weather"]


def test_salvaged_values_are_typed_by_the_specs_as_the_gate_types_them():
    """A Qwen3-Coder block read by salvage (the text asked for pythonic): its untyped values settle by the specs."""
    tools = load_tools([{"name": "get_weather", "parameters": {"type": "object", "properties": {
        "zip": {"type": "string"}, "days": {"type": "integer"}}}}])
    text = ("Calling it:\n<tool_call>\n<function=get_weather>\n<parameter=zip>\n94105\n</parameter>\n"
            "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")
    report = salvage_report(text, "toolace", tools)
    assert [c.arguments for c in report.calls] == [{"zip": "94105", "days": 3}]


def test_arguments_written_right_after_a_tool_name_are_a_call():
    """NAME{...} (a sentinel format's call whose tokens were lost), Kimi-K2's id before the object, or DeepSeek V3's
    name line before a fenced object: structured and offered, a call; in a sentence, or naming no offered tool, not."""
    assert read('get_weather{"city": "Paris"}') == [P]
    assert read('functions.get_weather:0{"city": "Paris"}') == [P]
    assert read('functionget_weather\n```json\n{"city": "Paris"}\n```') == [P]
    assert read('get_weather\n```json\n{"city": "Paris"}\n```') == [P]
    assert read('<tool_calls>get_weather[ARGS]{"city": "Paris"}') == [P]  # a format's token between name and object
    assert read('<｜tool▁calls▁end｜>get_weather<｜tool▁sep｜>{"city": "Paris"}') == [P]
    assert read('I ran get_weather{"city": "Paris"} yesterday.') == []
    assert read('get_weather {"city": "Paris"}') == [P]  # one blank between them (CWM's layout, its tags lost)
    assert read('get_weather  {"city": "Paris"}') == read('I ran get_weather {"city": "Paris"} yesterday.') == []
    assert read('lookup{"city": "Paris"}') == []
    assert read('lookup{"term": "x"}', None) == [ToolCall("lookup", {"term": "x"})]


def test_a_call_beside_gpt_oss_final_channel_is_still_read():
    final = '<|channel|>final<|message|>As JSON: {"name": "get_time", "arguments": {"city": "Paris"}}<|end|>'
    call = '<|start|>assistant<|channel|>commentary to=functions.get_weather json<|message|>{"city": "Paris"'
    assert read(final + call + "}<|call|>") == [P]
    assert [c.name for c in read(final + call)] == ["get_weather"]  # cut: the answer's JSON is still text


def test_keyed_objects_and_pairs_need_the_tools():
    """Without a tool list, {"NAME": {...}} and ("NAME", {...}) are data (a record, a pair): never calls."""
    for text in ('{"get_weather": {"city": "Paris"}}', "('get_weather', {'city': 'Paris'})",
                 '[["get_weather", {"city": "Paris"}]]'):
        assert read(text, None) == [], text


def test_markdown_escaped_parameter_names_take_the_declared_names_through_the_pipeline():
    tools = [{"name": "describe", "parameters": {"type": "object", "properties": {
        "topic": {"type": "string"}, "detail_level": {"type": "integer"}}, "required": ["topic"]}}]
    want = [{"name": "describe", "arguments": {"topic": "x", "detail_level": 2}}]
    for text in ('describe(topic="x", detail\\_level=2)',
                 '{"name": "describe", "arguments": {"topic": "x", "detail\\_level": 2}}',
                 '[{"name": "describe", "arguments": {"topic": "x", "detail\\_level": 2}}]',
                 '<tool_call>{"name": "describe", "arguments": {"topic": "x", "detail\\_level": 2}}</tool_call>',
                 "{'describe': {'topic': 'x', 'detail\\_level': 2}}"):
        assert Refiner().refine({"upstream": text, "tools": tools})["calls"] == want, text


def test_bfcl_shapes_through_the_pipeline():
    for text in ('[{"get_weather": {"city": "Paris"}}, {"get_time": {"city": "Paris"}}]',
                 "[('get_weather', {'city': 'Paris'}), ('get_time', {'city': 'Paris'})]",
                 '[get_weather(city="Paris")] + [get_time(city="Paris")]'):
        res = Refiner().refine({"upstream": text, "tools": TOOLS})
        assert res["calls"] == [P.to_dict(), T.to_dict()], text


def test_markdown_escaped_parameter_names_take_the_declared_names():
    offered = {"describe": ["topic", "detail_level"]}
    want = [ToolCall("describe", {"topic": "x", "detail_level": 2})]
    esc = "detail" + "\\" + "_level"  # detail\_level, as markdown escapes it
    for text in ('[{"name": "describe", "arguments": {"topic": "x", "ESC": 2}}]',
                 '{"describe": {"topic": "x", "ESC": 2}}',
                 "('describe', {'topic': 'x', 'ESC': 2})",
                 '<tool_call>{"name": "describe", "arguments": {"topic": "x", "ESC": 2}}</tool_call>',
                 'describe{"topic": "x", "ESC": 2}',
                 "[describe(topic='x', ESC=2)]"):
        assert read(text.replace("ESC", esc), offered) == want, text
    # without a tool list the name is kept as written
    text = '{"name": "describe", "arguments": {"ESC": 2}}'.replace("ESC", esc.replace("\\", "\\\\"))
    assert read(text, None) == [ToolCall("describe", {esc: 2})]


def test_markers_of_many_formats_are_read_in_the_first_few_only():
    """A text holding the markers of more formats than MAX_TAGGED_FORMATS (a storm, never a real answer) has the
    regions of the first ones read; the reading says so and is marked incomplete."""
    from refiner import formats as fmts

    markers = [f.detection.markers[0] for f in fmts.by_rank() if f.detection.markers and not f.detection.bare]
    text = " ".join(markers[: salvage_mod.MAX_TAGGED_FORMATS + 6]) * 3
    got = salvage(text, OFFERED)
    assert not got.complete
    assert any(f"only the first {salvage_mod.MAX_TAGGED_FORMATS} were read" in n for n in got.notes)
    # a real answer with two formats' markers is read in both
    two = salvage('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
                  '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}}]', OFFERED)
    assert [c.arguments["city"] for c in two.calls] == ["Paris", "Rome"]


def test_a_bytes_literal_in_a_dict_is_read_as_its_text_and_said_so():
    got = salvage("{'name': 'get_weather', 'arguments': {'city': b'Paris'}}", OFFERED)
    assert got.calls == [P]
    assert any("bytes literal b'Paris' read as the string 'Paris'" in n for n in got.notes)
    got = salvage("{'city': b'Paris'} is a dict.", OFFERED)  # no call read: nothing said of its values
    assert got.calls == [] and not any("bytes" in n for n in got.notes)


def test_markers_given_for_a_text_longer_than_the_lenient_limit_are_those_of_the_part_read():
    """Salvage reads a text cut at MAX_LENIENT_CHARS: the caller's markers (found in the whole text) count only where
    they fit in the part kept, as if it had looked for them there."""
    from refiner.formats.base import MAX_LENIENT_CHARS, marker_positions

    call = '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
    closed = '{"name": "f", "arguments": {"a": 1}}</tool_call> '  # (a closer, its opening tag lost)
    for before, after in ((call + " ", " [TOOL_CALLS]"), (closed, "[TOOL_CALLS]"), (" ", call)):
        text = before + "x" * (MAX_LENIENT_CHARS - len(before) - 5) + after
        given = salvage(text, {"f": ["a"]}, markers=marker_positions(text))
        own = salvage(text, {"f": ["a"]})
        assert (given.calls, given.notes) == (own.calls, own.notes)
    assert given.calls == []
    assert salvage(call + " " + "x" * MAX_LENIENT_CHARS, {"f": ["a"]}).calls == [ToolCall("f", {"a": 1})]
