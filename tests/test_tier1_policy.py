"""Tier-1 policy rules that the BFCL-derived suite (refiner/eval/tier1_suite.py) called for, on hand-made cases taken
from BFCL's own records: each rule does its job and leaves correct calls alone."""

from __future__ import annotations

from refiner import formats
from refiner.calls import ToolCall
from refiner.gate import check_calls
from refiner.pipeline import Refiner
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
