"""Keys written after a sigil, a blank after them (``@city "Paris"``), in markup no format or family here writes: the
anchored reader (:mod:`refiner.formats.anchored`) reads them exactly, and no call from prose that names the tools and
their parameters beside such characters."""

from __future__ import annotations

import pytest

from refiner.calls import ToolCall
from refiner.formats.anchored import anchored_calls

OFFERED = {"get_weather": ["city", "days", "units"], "get_time": ["zone"]}

CALLS = [
    ('<<fn get_weather @city "Paris" @days 3>>', [ToolCall("get_weather", {"city": "Paris", "days": 3})]),
    ('<<fn get_weather @city "São Paulo, Brasil" @days 3 @units "metric">>',
     [ToolCall("get_weather", {"city": "São Paulo, Brasil", "days": 3, "units": "metric"})]),
    ('<<fn get_weather @city "Paris" @days 3>>\n<<fn get_time @zone "UTC">>',
     [ToolCall("get_weather", {"city": "Paris", "days": 3}), ToolCall("get_time", {"zone": "UTC"})]),
    ("%call get_weather\n  ~city Paris\n  ~days 3\n%end", [ToolCall("get_weather", {"city": "Paris", "days": 3})]),
    ('<<fn get_weather @city "Paris">>', [ToolCall("get_weather", {"city": "Paris"})]),  # one key: closed by >>
]

PROSE = [
    "use get_weather: the city is Paris, :days may be 3",
    "Run get_weather @city Paris @days 3 if you like.",
    "* get_weather :city the town to look up :days how many days ahead",
    "> get_weather @city Paris or Rome @days 3 at most",
    "# get_weather\n  :city the city name\n  :days number of days",
    "Note (get_weather :city is required)",
    "- get_weather @city, @days: the forecast inputs",
]


@pytest.mark.parametrize("text,calls", CALLS)
def test_keys_after_a_sigil_are_read_exactly(text, calls):
    found, notes = anchored_calls(text, 0, OFFERED)
    assert [f.call for f in found] == calls
    assert notes and all(f.how.startswith("anchored on the offered names") for f in found)


@pytest.mark.parametrize("text", PROSE)
def test_prose_with_sigils_near_the_names_is_not_a_call(text):
    assert anchored_calls(text, 0, OFFERED)[0] == [], text
    assert anchored_calls(text, 0, {"get_weather": ["city"]})[0] == [], text
