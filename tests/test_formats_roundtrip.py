"""Round trips: ``parse_strict(render(calls)) == calls`` for every format over random call lists, lenient parsing
agrees without problems, text around the calls does not matter, and detection names the format."""

from __future__ import annotations

import keyword
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refiner import formats
from refiner.calls import ToolCall, canonical_json

# A literal "</think>" marks the end of reasoning (base.strip_reasoning), and FunctionGemma's "<escape>" and Gemma 4's
# '<|"|>' quote their strings (a string holding one cannot be written: RenderError), so call text never holds them.
_texts = st.text(max_size=12).filter(lambda s: "</think>" not in s and "<escape>" not in s and '<|"|>' not in s)
# JSON scalars: unicode text, big and negative ints, finite floats (NaN/Infinity are not JSON).
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _texts
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
    max_leaves=8,
)
arguments = st.dictionaries(_texts, json_values, max_size=4)
names = st.text(min_size=1, max_size=20).filter(lambda s: s.strip() != "" and "</think>" not in s)
identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}(\.[A-Za-z_][A-Za-z0-9_]{0,8})?", fullmatch=True).filter(
    lambda s: not any(keyword.iskeyword(part) for part in s.split("."))
)


NO_OUTPUTS = st.just(())


def _calls(name_st, args_st, outputs_st=NO_OUTPUTS, min_size=1, max_size=5):
    return st.lists(
        st.builds(ToolCall, name=name_st, arguments=args_st, outputs=outputs_st), min_size=min_size, max_size=max_size
    )


def order_calls():
    return st.lists(
        st.builds(lambda n, s: ToolCall(n, {}, step=s), names, st.integers(min_value=-3, max_value=40)),
        min_size=1,
        max_size=10,
    )


def calls_for(fmt: str):
    """A strategy of call lists that ``fmt`` represents exactly, read from the format's attributes: what its names
    may be, whether calls carry arguments, steps or output labels."""
    f = formats.get(fmt)
    if f.steps:
        return order_calls()
    name_st = names if f.name_pattern is None else identifiers.filter(lambda s: re.fullmatch(f.name_pattern, s))
    args_st = st.just({}) if f.names_only else arguments
    outputs_st = {None: NO_OUTPUTS, "one": st.lists(_texts, max_size=1).map(tuple),
                  "list": st.lists(_texts, max_size=3).map(tuple)}[f.outputs]
    return _calls(name_st, args_st, outputs_st)


ALL = sorted(formats.names())
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_every_format_declares_what_the_rest_of_the_code_reads():
    """The registry contract: each format has a description, tags, a detection rule and an example with at least two
    calls, which it parses strictly, renders back to the same calls, and detection names; the attributes hold
    values the code understands. (Registration itself refuses a format without name, description, detection or
    example.)"""
    ranks = {}
    for f in formats.all_formats():
        assert f.description and isinstance(f.tags, tuple), f.name
        assert isinstance(f.detection, formats.Detection), f.name
        assert f.detection.bare or f.detection.markers or f.detection.by_name, f"{f.name}: a tagged format needs markers"
        assert f.detection.rank not in ranks, f"{f.name} shares rank {f.detection.rank} with {ranks.get(f.detection.rank)}"
        ranks[f.detection.rank] = f.name
        assert f.outputs in (None, "one", "list") and isinstance(f.names_only, bool) and isinstance(f.steps, bool)
        calls = f.parse_strict(f.example)
        assert len(calls) >= 2, f.name
        assert f.parse_strict(f.render(calls)) == calls, f.name
        assert formats.detect_format(f.example) == f.name or f.detection.by_name, f.name
    assert {f.name for f in formats.all_formats() if f.order_sensitive} >= {"nestools", "order", "nestful"}


def test_a_format_without_its_attributes_is_refused():
    class Incomplete(formats.WireFormat):
        name = "incomplete"
        description = "no detection rule, no example"

    with pytest.raises(TypeError, match="detection, example"):
        formats.register(Incomplete)
    assert "incomplete" not in formats.names()


PROSE = ["", "Sure, calling it now [1] {x}:\n", "```\n"]


def assert_detected(text: str, name: str, calls: list) -> None:
    """Detection names ``name``; only calls with no arguments, which leave nothing but names between tags two rows
    share (TeleChat4's and GLM's ``<tool_call>NAME</tool_call>``), may be named by the earlier row, reading the same."""
    if formats.get(name).detection.by_name:  # (detection never names it)
        return
    got = formats.detect_format(text)
    if got != name and not any(c.arguments for c in calls):
        assert formats.get(got).detection.rank < formats.get(name).detection.rank
        assert formats.get(got).parse_strict(text) == calls
    else:
        assert got == name


@pytest.mark.parametrize("name", ALL)
def test_round_trip(name):
    """One generated call list per example checks: strict round trip, lenient agreement, detection, and the same
    with reasoning before and prose around the calls."""
    fmt = formats.get(name)

    @SETTINGS
    @given(calls_for(name), st.sampled_from(PROSE))
    def check(calls, prose):
        text = fmt.render(calls)
        assert fmt.parse_strict(text) == calls
        got = fmt.parse_lenient(text)
        assert got.problems == [] and got.calls == calls
        # a tag string quoted inside the calls of another format is read as that tag (detect's documented rule)
        tags_inside = any(tag in canonical_json([c.to_dict() for c in calls]) for tag in formats.all_markers())
        if not tags_inside:
            assert_detected(text, name, calls)
        wrapped = f"<think>I need [some] {{tools}}, maybe <b>.</think>\n{prose}{text}\nDone [ok]."
        assert fmt.parse_strict(wrapped) == calls
        assert fmt.parse_lenient(wrapped).calls == calls
        if not tags_inside:
            assert_detected(wrapped, name, calls)

    check()


@pytest.mark.parametrize("name", ["xlam", "nestools", "order", "apibank", "openai", "nestful", "toolace"])
def test_empty_call_list_round_trips(name):
    fmt = formats.get(name)
    assert fmt.parse_strict(fmt.render([])) == []


def test_unicode_and_quotes_survive_every_format():
    args = {"q": "naïve \"quoted\" 'single' \\ back — 東京 😀", "n": -0.5, "deep": {"l": [1, [2, {"x": None}]]}}
    for name in ALL:
        fmt = formats.get(name)
        call = ToolCall("search_v2", {}, step=1) if fmt.names_only else ToolCall("search_v2", args)
        assert fmt.parse_strict(fmt.render([call])) == [call], name


@pytest.mark.parametrize("name", ALL)
def test_many_calls_round_trip(name):
    """Hundreds of calls in one text (seeded, not Hypothesis: generating that many is slow)."""
    import random

    fmt = formats.get(name)
    rng = random.Random(7)
    calls = []
    for i in range(300):
        args = {
            f"p{j}": rng.choice([i, -j * 1.5, f"v{i}é", None, True, [i, {"k": "x"}], {}])
            for j in range(rng.randint(0, 4))
        }
        if fmt.steps:
            calls.append(ToolCall(f"tool_{i % 17}", {}, step=i // 3))
        elif fmt.outputs:
            calls.append(ToolCall(f"tool_{i}", args, outputs=(f"$var_{i}",)))
        else:
            calls.append(ToolCall(f"tool_{i}", args))
    assert fmt.parse_strict(fmt.render(calls)) == calls


def _needs(fmt) -> tuple[str, ...]:
    return (*fmt.detection.markers, *fmt.detection.also_read)


TAGGED = [f for f in formats.by_rank() if not f.detection.bare and _needs(f)]


@pytest.mark.parametrize("name", ALL)
def test_a_tagged_format_reads_strictly_only_a_text_holding_its_marker(name):
    """Detection tries a tagged format's strict reading only where one of its markers (or ``also_read`` spellings)
    occurs (base.Detection): no tagged format may read strictly, without them, a text another format renders."""
    fmt = formats.get(name)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(calls_for(name), st.sampled_from(PROSE))
    def check(calls, prose):
        text = prose + fmt.render(calls)
        for other in TAGGED:
            if any(m in text for m in _needs(other)):
                continue
            with pytest.raises(formats.FormatError):
                other.parse_strict(text)

    check()


def test_no_tagged_format_reads_a_corpus_text_without_its_marker():
    """The same over texts written elsewhere: the dialect and family corpora, canitoolcall's raw outputs and every
    format's example."""
    import dialect_corpus
    import family_corpus

    texts = [f.example for f in formats.all_formats()]
    texts += [r.text for r in dialect_corpus.load()]
    texts += [r.record["raw_output"] for r in family_corpus.load()]
    try:
        from canitoolcall.fixtures import load_fixtures
    except ImportError:
        pass
    else:
        texts += [fx.raw_output for fx in load_fixtures()]
    wrong = []
    for text in texts:
        for fmt in TAGGED:
            if any(m in text for m in _needs(fmt)):
                continue
            try:
                fmt.parse_strict(text)
            except formats.FormatError:
                continue
            wrong.append((fmt.name, text[:80]))
    assert len(texts) > 600 and wrong == []
