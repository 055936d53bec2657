"""Tier-1 policy rules that the BFCL-derived suite (refiner/eval/tier1_suite.py) called for, on hand-made cases taken
from BFCL's own records: each rule does its job and leaves correct calls alone."""

from __future__ import annotations

from refiner import formats
from refiner.calls import ToolCall
from refiner.gate import check_calls
from refiner.pipeline import Refiner
from refiner.repair import is_misspelling, name_words, snap_by_arguments
from refiner.specs import load_tools

# BFCL live_simple_103-61-1: optional string parameters whose declared default is null, and a gold call passing null
CALCULATE_TAX = {
    "name": "calculate_tax",
    "description": "Calculates the applicable sales tax for a given purchase amount and jurisdiction.",
    "parameters": {
        "type": "dict",
        "required": ["purchase_amount", "state"],
        "properties": {
            "purchase_amount": {"type": "float", "description": "The total purchase amount in dollars."},
            "state": {"type": "string", "description": "The U.S. state abbreviation."},
            "county": {"type": "string", "description": "The county.", "default": None},
            "city": {"type": "string", "description": "The city."},
            "tax_exempt": {"type": "boolean", "description": "Tax-exempt purchase.", "default": False},
        },
    },
}
TAX_GOLD = {"purchase_amount": 999.0, "state": "CA", "county": None, "tax_exempt": False}


# BFCL live_multiple_421-141-10: enum parameters whose declared default ("dontcare") is not an enum member
FIND_MOVIES = {
    "name": "Movies_1_FindMovies",
    "description": "Search for movies by location, genre, or other attributes at various theaters.",
    "parameters": {"type": "dict", "required": ["location"], "properties": {
        "location": {"type": "string", "description": "The city where the theatre is located."},
        "genre": {"type": "string", "enum": ["World", "Offbeat", "Mystery"], "default": "dontcare"},
        "show_type": {"type": "string", "enum": ["regular", "3d", "imax"], "default": "dontcare"}}},
}
MOVIES_GOLD = {"location": "Mountain View, CA", "genre": "dontcare", "show_type": "dontcare"}


def test_the_declared_default_is_valid_whatever_the_enum_says():
    tools = load_tools([FIND_MOVIES])
    assert check_calls([ToolCall("Movies_1_FindMovies", MOVIES_GOLD)], tools) == []
    diags = check_calls([ToolCall("Movies_1_FindMovies", {**MOVIES_GOLD, "genre": "whatever"})], tools)
    assert [(d.code, d.param) for d in diags] == [("enum", "genre")]
    fmt = formats.get("xlam")
    for trust in (False, True):
        res = Refiner(trust_spec=trust).refine({"tools": [FIND_MOVIES], "format": "xlam",
                                               "upstream": fmt.render([ToolCall("Movies_1_FindMoies", MOVIES_GOLD)])})
        assert fmt.parse_strict(res["refined"]) == [ToolCall("Movies_1_FindMovies", MOVIES_GOLD)], res["reason"]


def test_null_is_valid_where_the_spec_declares_it_the_default():
    tools = load_tools([CALCULATE_TAX])
    assert check_calls([ToolCall("calculate_tax", TAX_GOLD)], tools) == []
    # without a null default, null for a string is still a type finding
    diags = check_calls([ToolCall("calculate_tax", {**TAX_GOLD, "city": None})], tools)
    assert [(d.code, d.param) for d in diags] == [("type", "city")]
    # a non-null default does not make null valid either
    diags = check_calls([ToolCall("calculate_tax", {**TAX_GOLD, "tax_exempt": None})], tools)
    assert [(d.code, d.param) for d in diags] == [("type", "tax_exempt")]


def test_a_tool_name_typo_is_fixed_when_the_call_passes_null_defaults():
    """Snapping the name makes the call's values checkable; its null defaults must not count against the repair."""
    fmt = formats.get("hermes")
    for trust in (False, True):
        res = Refiner(trust_spec=trust).refine({"tools": [CALCULATE_TAX], "format": "hermes",
                                               "upstream": fmt.render([ToolCall("calculate_tex", TAX_GOLD)])})
        assert fmt.parse_strict(res["refined"]) == [ToolCall("calculate_tax", TAX_GOLD)], res["reason"]
        assert res["stage"] == "repaired"


# BFCL simple_python_160 and parallel_80, with a sibling tool that shares words but not parameters
GET_CASE_INFO = {
    "name": "get_case_info",
    "description": "Retrieve case details using a specific case docket number and court location.",
    "parameters": {"type": "dict", "required": ["docket", "court", "info_type"], "properties": {
        "docket": {"type": "string", "description": "Docket number."},
        "court": {"type": "string", "description": "Court in which the case was heard."},
        "info_type": {"type": "string", "description": "victim, accused, verdict etc."}}},
}
GET_CASE_STATUS = {
    "name": "get_case_status",
    "description": "Status of a case.",
    "parameters": {"type": "dict", "required": ["case_id"], "properties": {"case_id": {"type": "string"}}},
}
MATH_GCD = {
    "name": "math.gcd",
    "description": "Calculate the greatest common divisor of two integers.",
    "parameters": {"type": "dict", "required": ["num1", "num2"], "properties": {
        "num1": {"type": "integer"}, "num2": {"type": "integer"}}},
}
CASE_ARGS = {"docket": "2022/AL2562", "court": "California", "info_type": "victim"}


def test_snap_by_arguments_picks_the_one_tool_the_arguments_fit():
    tools = {t.name: t for t in load_tools([GET_CASE_INFO, GET_CASE_STATUS, MATH_GCD])}
    assert name_words("scienceFacts.getWeights") == {"science", "fact", "get", "weight"}
    assert snap_by_arguments("math.gcd_info", {"num1": 36, "num2": 48}, tools) == "math.gcd"
    assert snap_by_arguments("case_info", CASE_ARGS, tools) == "get_case_info"
    assert snap_by_arguments("get_case_infos_data", CASE_ARGS, tools) == "get_case_info"
    # a changed word is never enough: a synonym (retrieve/get) cannot be told from an opposite (API-Bank's gold calls
    # DeleteReminder, which its tool list lacks, with exactly the parameters of the AddReminder it offers)
    assert snap_by_arguments("retrieve_case_info", CASE_ARGS, tools) is None
    reminders = {t.name: t for t in load_tools([{"name": "AddReminder", "parameters": {"type": "object", "properties": {
        "token": {"type": "string"}, "content": {"type": "string"}, "time": {"type": "string"}},
        "required": ["token", "content", "time"]}}])}
    assert snap_by_arguments("DeleteReminder", {"token": "t", "content": "c", "time": "x"}, reminders) is None
    # an argument the tool does not declare, or a required parameter missing: it does not fit
    assert snap_by_arguments("case_info", {**CASE_ARGS, "year": 2022}, tools) is None
    assert snap_by_arguments("case_info", {"docket": "x", "court": "y"}, tools) is None
    # no arguments: no evidence
    assert snap_by_arguments("math.gcd_info", {}, tools) is None
    # a name with a format's markers in it: snapped when the text was read in its own format (Kimi-K2's
    # functions.NAME:0 once its sentinels are lost), not when it was read in another one (a gpt-oss text read as
    # Mistral's, which may have lost calls)
    junk = "commentary to=functions.math.gcd <|constrain|>json"
    assert snap_by_arguments(junk, {"num1": 1, "num2": 2}, tools) == "math.gcd"
    assert snap_by_arguments(junk, {"num1": 1, "num2": 2}, tools, identifiers_only=True) is None
    assert snap_by_arguments("math.gcd_info", {"num1": 1, "num2": 2}, tools, identifiers_only=True) == "math.gcd"


def test_snap_by_arguments_gives_up_when_two_tools_fit():
    twin = {**GET_CASE_INFO, "name": "get_case"}
    tools = {t.name: t for t in load_tools([GET_CASE_INFO, twin])}
    assert snap_by_arguments("get_case_info_data", CASE_ARGS, tools) is None


def test_a_look_alike_tool_name_is_fixed_through_the_pipeline():
    fmt = formats.get("toolace")
    bad = [ToolCall("get_case_info_data", CASE_ARGS), ToolCall("math.gcd_info", {"num1": 60, "num2": 96})]
    res = Refiner().refine({"tools": [GET_CASE_INFO, GET_CASE_STATUS, MATH_GCD], "format": "toolace",
                            "upstream": fmt.render(bad)})
    assert fmt.parse_strict(res["refined"]) == [ToolCall("get_case_info", CASE_ARGS),
                                                ToolCall("math.gcd", {"num1": 60, "num2": 96})]
    assert [a["code"] for a in res["actions"]] == ["snap_tool", "snap_tool"]


def test_a_moved_separator_is_a_slip_but_joined_or_split_words_are_a_convention():
    assert is_misspelling("fullt_erm_only", "full_term_only")  # BFCL history_api_get_president_by_year
    assert is_misspelling("includeh_uman_impact", "include_human_impact")
    assert not is_misspelling("sortBy", "sort_by")  # the same words: NESTFUL's gold writes sortBy for sort_by
    assert not is_misspelling("dietary__requirements", "dietary_requirements")
    assert not is_misspelling("getperimeter", "get_perimeter")  # words joined
    assert not is_misspelling("zip_code", "zipcode")  # a word split
    tools = [{"name": "history_api_get_president_by_year", "parameters": {"type": "object", "required": ["year"],
              "properties": {"year": {"type": "integer"}, "full_term_only": {"type": "boolean"}}}}]
    fmt = formats.get("hermes")
    bad = fmt.render([ToolCall("history_api_get_president_by_year", {"year": 1940, "fullt_erm_only": True})])
    res = Refiner().refine({"tools": tools, "format": "hermes", "upstream": bad})
    assert fmt.parse_strict(res["refined"]) == [
        ToolCall("history_api_get_president_by_year", {"year": 1940, "full_term_only": True})]
