"""refiner/formats/loose.py: look-alikes of a sentinel format's own tokens, and its counted bound."""

from __future__ import annotations

from refiner.formats import loose
from refiner.formats.base import Lenient

DEEPSEEK = ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
            "<｜tool▁calls▁end｜>"]


def test_look_alikes_are_written_as_the_token_and_reported():
    text = "<|tool_calls_begin|><｜tool▁call▁begin｜>function<｜TOOL-SEP｜get_time\n"
    out = Lenient()
    got = loose.respell_tokens(text, DEEPSEEK, out)
    assert got == "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
    assert [p.code for p in out.problems] == ["missing_tag", "missing_tag"]


def test_exact_tokens_and_other_formats_tokens_are_left_as_written():
    text = "<｜tool▁sep｜> <|im_end|> <|call|> [TOOL_CALLS]"
    assert loose.respell_tokens(text, DEEPSEEK) == text
    assert loose.respell_tokens("[tool_calls]f[args]{}", ["[TOOL_CALLS]", "[ARGS]"]) == "[TOOL_CALLS]f[ARGS]{}"


def test_a_token_storm_is_looked_at_up_to_the_counted_bound():
    spelt = "<|TOOL_SEP|>"
    text = "<｜tool▁sep｜>" * (loose.MAX_SCANNED - 1) + spelt * 3
    got = loose.respell_tokens(text, DEEPSEEK)
    # the first look-alike is inside the bound, the two after it are not
    assert got == "<｜tool▁sep｜>" * loose.MAX_SCANNED + spelt * 2
