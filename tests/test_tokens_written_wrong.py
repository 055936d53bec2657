"""Attributes written wrong that the lenient readers put right: an XML parameter grammar attribute that lost its
``=``. Each strict reading still refuses the text."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall


def test_an_xml_parameter_attribute_that_lost_its_equals_sign_is_read_leniently():
    k3 = formats.get("kimi_k3")
    good = k3.render([ToolCall("get_weather", {"city": "Paris"})])
    text = good.replace('key="city"', 'key"city"')
    with pytest.raises(formats.FormatError):
        k3.parse_strict(text)
    assert k3.parse_lenient(text).calls == [ToolCall("get_weather", {"city": "Paris"})]


def test_a_json_key_inside_a_tag_is_no_attribute():
    rwkv = formats.get("rwkv")
    text = '<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke {"name": "f", "arguments": {"a": 1}}'
    assert all(c.name != ":" for c in rwkv.parse_lenient(text).calls)
