"""Derivation on layouts that need more than one diff: Python calls in a list, ids the template numbers itself, an
empty section written in a turn with no call, reasoning written only beside calls, a plain answer addressed as a
call, one JSON call per line, markers that share their first characters, and a family no record holds that a
grammar of its own writes. Every template here is written for these tests, with markers of its own."""

from __future__ import annotations

from pathlib import Path

from refiner.formats.derive import derive, install
from refiner.formats.json_calls import JsonCalls
from refiner.formats.named_json import NamedJson
from refiner.formats.pythonic_sentinels import SentinelPythonic


def _derive(tmp_path: Path, name: str, source: str):
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    return derive(path)


def _chat(assistant: str) -> str:
    """A chat whose assistant turn is ``assistant`` (jinja, ``m`` the message)."""
    return ("{%- for m in messages %}{%- if m.role == 'user' %}<|u|>{{ m.content }}<|eot|>\n"
            "{%- elif m.role == 'assistant' %}" + assistant + "{%- endif %}{%- endfor %}")


PYTHONIC = _chat(
    "<|a|>{{ m.content or '' }}{%- if m.tool_calls %}<|calls|>["
    "{%- for tc in m.tool_calls %}{{ ', ' if not loop.first }}{{ tc.function.name }}("
    "{%- for k, v in tc.function.arguments.items() %}{{ ', ' if not loop.first }}{{ k }}="
    "{{ v | tojson if v is mapping else v | string if v is not string else \"'\" + v + \"'\" }}"
    "{%- endfor %}){%- endfor %}]<|/calls|>{%- endif %}<|eot|>\n")


def test_python_calls_in_a_list_between_markers_are_a_pythonic_row(tmp_path):
    d = _derive(tmp_path, "pythonic.jinja", PYTHONIC)
    assert not d.special, d.why
    assert d.plan.grammar is SentinelPythonic
    assert (d.plan.spelling.open, d.plan.spelling.close, d.plan.spelling.lines) == ("<|calls|>", "<|/calls|>", False)
    assert d.record.strings == "python"


NUMBERED = _chat(
    "<|a|>{{ m.content or '' }}{%- if m.tool_calls %}<|go_calls|>["
    "{%- for tc in m.tool_calls %}{{ ', ' if not loop.first }}"
    "{\"num\": \"{{ loop.index0 }}\", \"tool\": \"{{ tc.function.name }}\", \"input\": {{ tc.function.arguments | tojson }}}"
    "{%- endfor %}]<|go_done|>{%- endif %}<|go_reply|><|eot|>\n")


def test_an_id_the_template_numbers_itself_is_the_call_objects_id_key(tmp_path):
    """The calls' own place in the turn as their id, and markers that share their first characters with the ones a
    turn without calls writes (``<|go_calls|>`` against ``<|go_reply|>``): the cut goes back to where each opens."""
    d = _derive(tmp_path, "numbered.jinja", NUMBERED)
    assert not d.special, d.why
    assert d.plan.grammar is JsonCalls
    sp = d.plan.spelling
    assert (sp.open, sp.close, sp.name_key, sp.arg_keys[0], sp.id_key) == ("<|go_calls|>", "<|go_done|>", "tool",
                                                                           "input", "num")


EMPTY_SECTION = _chat(
    "{%- if not m.content %}<|a|><|calls_open|>{%- for tc in m.tool_calls or [] %}<|call|>{{ tc.function.name }}"
    "<|args|>{{ tc.function.arguments | tojson }}<|/call|>{%- endfor %}<|calls_shut|><|eot|>\n"
    "{%- else %}<|a|>{{ m.content }}<|eot|>\n{%- endif %}")


def test_an_empty_section_written_in_a_turn_with_no_call_keeps_its_markers(tmp_path):
    d = _derive(tmp_path, "empty_section.jinja", EMPTY_SECTION)
    assert not d.special, d.why
    assert d.plan.grammar is NamedJson
    sp = d.plan.spelling
    assert (sp.section_open, sp.section_close, sp.call_open) == ("<|calls_open|>", "<|calls_shut|>", "<|call|>")


REASONING_WITH_CALLS = _chat(
    "<|a|>{%- if m.tool_calls %}<|muse|>{{ m.reasoning_content or '' }}<|/muse|><|act|>["
    "{%- for tc in m.tool_calls %}{{ ', ' if not loop.first }}"
    "{\"name\": \"{{ tc.function.name }}\", \"arguments\": {{ tc.function.arguments | tojson }}}"
    "{%- endfor %}]<|/act|>{%- else %}{{ m.content }}{%- endif %}<|eot|>\n")


def test_reasoning_written_only_beside_calls_is_not_the_sections_opener(tmp_path):
    d = _derive(tmp_path, "reasoning_with_calls.jinja", REASONING_WITH_CALLS)
    assert not d.special, d.why
    assert (d.record.reasoning_start, d.record.reasoning_end) == ("<|muse|>", "<|/muse|>")
    assert (d.plan.spelling.open, d.plan.spelling.close) == ("<|act|>", "<|/act|>")


RECIPIENT = _chat(
    "<|a|>{%- if m.content %}=>reply\n{{ m.content }}{%- endif %}"
    "{%- for tc in m.tool_calls or [] %}=>{{ tc.function.name }}\n{{ tc.function.arguments | tojson }}{%- endfor %}"
    "<|eot|>\n")


def test_a_plain_answer_written_as_a_call_names_its_recipient(tmp_path):
    d = _derive(tmp_path, "recipient.jinja", RECIPIENT)
    assert not d.special, d.why
    assert d.plan.grammar is NamedJson
    assert (d.plan.spelling.call_open, d.plan.spelling.name_close, d.plan.spelling.text_recipients) == ("=>", "\n",
                                                                                                        ("reply",))


LINES = _chat(
    "<|a|>{{ m.content or '' }}{%- if m.tool_calls %}<calls>{{ '\\n' }}{%- for tc in m.tool_calls %}"
    "{\"name\": \"{{ tc.function.name }}\", \"arguments\": {{ tc.function.arguments | tojson }}}{{ '\\n' }}"
    "{%- endfor %}</calls>{%- endif %}<|eot|>\n")


def test_one_json_call_per_line_in_a_section(tmp_path):
    d = _derive(tmp_path, "lines.jinja", LINES)
    assert not d.special, d.why
    sp = d.plan.spelling
    assert (sp.open, sp.close, sp.payload) == ("<calls>", "</calls>", "lines")


COUNTED = _chat(
    "<|a|>{{ m.content or '' }}{%- if m.tool_calls %}<|tool_calls_section_begin|>"
    "{%- set seen = [] %}{%- for tc in m.tool_calls %}"
    "<|tool_call_begin|>functions.{{ tc.function.name }}:{{ seen | length }}<|tool_call_argument_begin|>"
    "{{ tc.function.arguments | tojson }}<|tool_call_end|>{%- set _ = seen.append(1) %}"
    "{%- endfor %}<|tool_calls_section_end|>{%- endif %}<|eot|>\n")


def test_a_family_no_record_holds_is_the_grammar_that_writes_it_exactly(tmp_path):
    """Kimi-K2's layout (a call index after the name, counted in a list the template appends to): no spelling holds
    the counter; its own grammar writes both renders exactly, so the derived dialect is that row."""
    d = _derive(tmp_path, "counted.jinja", COUNTED)
    assert any("numbers the calls" in m for m in d.record.missing)
    assert not d.special and d.same_as == "kimi_k2" and d.fmt.name == "kimi_k2"
    assert install(d) == "kimi_k2"
    one_space_more = COUNTED.replace("<|tool_call_end|>{%-", "<|tool_call_end|>{{ ' ' }}{%-")
    d = _derive(tmp_path, "counted_spaced.jinja", one_space_more)
    assert d.same_as is None  # written otherwise than the row writes it: not that row


ONE_CALL = _chat(
    "<|a|>{{ m.content or '' }}{%- if m.tool_calls %}{%- if m.tool_calls | length > 1 %}"
    "{{ raise_exception('one call at a time') }}{%- endif %}<|call|>{{ m.tool_calls[0].function | tojson }}"
    "{%- endif %}<|eot|>\n")
FIRST_ONLY = ONE_CALL.replace("{%- if m.tool_calls | length > 1 %}{{ raise_exception('one call at a time') }}"
                              "{%- endif %}", "")


def test_a_template_that_writes_one_call_says_so(tmp_path):
    d = _derive(tmp_path, "one_call.jinja", ONE_CALL)
    assert d.special and "refuses two" in d.why and "what separates calls cannot be derived" in d.why
    d = _derive(tmp_path, "first_only.jinja", FIRST_ONLY)
    assert d.special and "only the first call of a turn" in d.why


# Llama 3.x JSON's layout, one call per turn: the object written key by key, "parameters" holding the arguments.
LLAMA_ONE = _chat(
    "<|a|>{%- if m.tool_calls %}{%- if m.tool_calls | length != 1 %}{{ raise_exception('a single call only') }}"
    "{%- endif %}{{ '{\"name\": \"' + m.tool_calls[0].function.name + '\", \"parameters\": ' }}"
    "{{ m.tool_calls[0].function.arguments | tojson }}{{ '}' }}{%- else %}{{ m.content }}{%- endif %}<|eot|>\n")


def test_a_template_writing_one_call_per_turn_is_the_row_that_writes_that_call_exactly(tmp_path):
    """What separates calls cannot be derived from a template that refuses two (or writes only the first); a
    built-in row that writes its one call exactly and reads it back is the dialect, with its own separator."""
    d = _derive(tmp_path, "llama_one.jinja", LLAMA_ONE)
    assert any("refuses two" in m for m in d.record.missing)
    assert not d.special and d.same_as == "llama3_json" and install(d) == "llama3_json"
    assert d.read_by == ["llama3_json"] and "one call per turn" in d.checks[-1]
    first_only = LLAMA_ONE.replace("{{ raise_exception('a single call only') }}", "")
    d = _derive(tmp_path, "llama_first.jinja", first_only)
    assert any("only the first call" in m for m in d.record.missing) and d.same_as == "llama3_json"
    # one space more than the row writes: read back by it, not that row
    spaced = LLAMA_ONE.replace("{{ '}' }}", "{{ ' }' }}")
    assert spaced != LLAMA_ONE
    d = _derive(tmp_path, "llama_spaced.jinja", spaced)
    assert d.special and d.read_by == ["llama3_json"] and "write it otherwise" in d.why



def test_a_template_joining_untagged_call_objects_is_the_joined_row_that_writes_them(tmp_path):
    """Call objects with no marker, joined by ``; ``: no record maps them onto a row (an untagged format), and the
    built-in row of the JSON-calls grammar's joined payload that writes both pairs of calls exactly is the dialect."""
    joined = _chat(
        "<|a|>{%- if m.tool_calls %}{%- for tc in m.tool_calls %}{%- if not loop.first %}; {% endif %}"
        "{{ {'name': tc.function.name, 'parameters': tc.function.arguments} | tojson }}{%- endfor %}"
        "{%- else %}{{ m.content }}{%- endif %}<|eot|>\n")
    d = _derive(tmp_path, "joined.jinja", joined)
    assert not d.special and d.same_as == "llama3_json" and install(d) == "llama3_json"
    assert "writes the template's renders of both pairs of calls exactly" in d.checks[-1]

# GigaChat 3's layout: the call is a message of its own after the assistant's, ended as every message is.
CALL_MESSAGE = _chat(
    "assistant<|role_sep|>\n{{ m.content or '' }}<|message_sep|>\n\n{% if m.tool_calls %}function call<|role_sep|>\n"
    "{{ {'name': m.tool_calls[0].function.name, 'arguments': m.tool_calls[0].function.arguments} | tojson }}"
    "<|message_sep|>\n\n{% endif %}")


def test_a_call_message_ended_as_the_row_separates_calls_is_that_row(tmp_path):
    """The one call a template writes, followed by the message end the row writes between calls, is that row's."""
    d = _derive(tmp_path, "call_message.jinja", CALL_MESSAGE)
    assert d.record.sections["one"].endswith("}<|message_sep|>\n\n")
    assert not d.special and d.same_as == "gigachat3" and "writes between calls after it" in d.checks[-1]
    d = _derive(tmp_path, "call_message_end.jinja", CALL_MESSAGE.replace("<|message_sep|>\n\n{% endif", "<|end|>{% endif"))
    assert d.special and "gigachat3" in d.read_by  # another end: read back, not that row


IDS_BETWEEN = _chat(
    "<|a|>{{ m.content or '' }}{%- for tc in m.tool_calls or [] %}[TOOL_CALLS]{{ tc.function.name }}[CALL_ID]"
    "{{ tc.id }}[ARGS]{{ tc.function.arguments | tojson }}{%- endfor %}<|eot|>\n")


def test_a_grammar_that_reads_ids_and_writes_none_is_the_row_of_a_template_writing_them(tmp_path):
    """Mistral v11's layout with the call id between the name and the arguments: no spelling holds the id there;
    its own grammar reads it and writes the calls without it, otherwise as the template does."""
    d = _derive(tmp_path, "ids_between.jinja", IDS_BETWEEN)
    assert d.record.id_position == "after_name"
    assert not d.special and d.same_as == "mistral_v11"
