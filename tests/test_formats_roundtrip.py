"""Round trips: ``parse_strict(render(calls)) == calls`` for every format over random call lists, lenient parsing
agrees without problems, text around the calls does not matter, and detection names the format."""

from __future__ import annotations

import keyword

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refiner import formats
from refiner.calls import ToolCall, canonical_json
from refiner.formats.detect import ALL_TAGS

# A literal "</think>" marks the end of reasoning (base.strip_reasoning), so call text never holds one here.
_texts = st.text(max_size=12).filter(lambda s: "</think>" not in s)
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
    """A strategy of call lists that ``fmt`` represents exactly."""
    if fmt == "toolace":
        return _calls(identifiers, arguments)
    if fmt == "order":
        return order_calls()
    if fmt == "nestools":
        return _calls(names, arguments, st.lists(_texts, max_size=3).map(tuple))
    if fmt == "nestful":
        return _calls(names, arguments, st.lists(_texts, max_size=1).map(tuple))
    return _calls(names, arguments)


ALL = sorted(formats.names())
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_all_formats_registered():
    assert set(ALL) == {
        "glaive",
        "toolace",
        "xlam",
        "nestools",
        "order",
        "apibank",
        "hermes",
        "openai",
        "anthropic",
        "nestful",
    }
    assert {f.name for f in formats.all_formats() if f.order_sensitive} == {"nestools", "order", "nestful"}


PROSE = ["", "Sure, calling it now [1] {x}:\n", "```\n"]


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
        tags_inside = any(tag in canonical_json([c.to_dict() for c in calls]) for tag in ALL_TAGS)
        if not tags_inside:
            assert formats.detect_format(text) == name
        wrapped = f"<think>I need [some] {{tools}}, maybe <b>.</think>\n{prose}{text}\nDone [ok]."
        assert fmt.parse_strict(wrapped) == calls
        assert fmt.parse_lenient(wrapped).calls == calls
        if not tags_inside:
            assert formats.detect_format(wrapped) == name

    check()


@pytest.mark.parametrize("name", ["xlam", "nestools", "order", "apibank", "openai", "nestful", "toolace"])
def test_empty_call_list_round_trips(name):
    fmt = formats.get(name)
    assert fmt.parse_strict(fmt.render([])) == []


def test_unicode_and_quotes_survive_every_format():
    args = {"q": "naïve \"quoted\" 'single' \\ back — 東京 😀", "n": -0.5, "deep": {"l": [1, [2, {"x": None}]]}}
    for name in ALL:
        fmt = formats.get(name)
        call = ToolCall("search_v2", args, step=1) if name == "order" else ToolCall("search_v2", args)
        if name == "order":
            call = ToolCall("search_v2", {}, step=1)
        assert fmt.parse_strict(fmt.render([call])) == [call], name


@pytest.mark.parametrize("name", ALL)
def test_many_calls_round_trip(name):
    """Hundreds of calls in one text (seeded, not Hypothesis: generating that many is slow)."""
    import random

    rng = random.Random(7)
    calls = []
    for i in range(300):
        args = {
            f"p{j}": rng.choice([i, -j * 1.5, f"v{i}é", None, True, [i, {"k": "x"}], {}])
            for j in range(rng.randint(0, 4))
        }
        if name == "order":
            calls.append(ToolCall(f"tool_{i % 17}", {}, step=i // 3))
        elif name == "nestools":
            calls.append(ToolCall(f"tool_{i}", args, outputs=(f"API_call_{i}",)))
        elif name == "nestful":
            calls.append(ToolCall(f"tool_{i}", args, outputs=(f"$var_{i}",)))
        else:
            calls.append(ToolCall(f"tool_{i}", args))
    fmt = formats.get(name)
    assert fmt.parse_strict(fmt.render(calls)) == calls
