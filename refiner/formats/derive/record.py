"""A family's dialect as one record of literals (:class:`Record`), filled by :mod:`~refiner.formats.derive.diff`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NAMES = ("tlq_alpha", "tlq_beta", "tlq_gamma")
ARGS = (
    {"kq_text": "vq text one", "kq_count": 4711, "kq_flag": True, "kq_items": ["vq_item", 2],
     "kq_info": {"vq_key": "vq_inner"}},
    {"kq_city": "vq_city"},
    {"kq_word": "vq_word", "kq_num": 17},
)
IDS = ("callq0000", "callq0001", "callq0002")  # nine letters and digits: Mistral's templates accept no other id
REASONING = "rq_thought_text"
USER = "uq_question_text"
CONTENT = "cq_answer_text"


@dataclass
class Record:
    """What a family writes, as literals the template wrote (whitespace included). ``shape``: ``json_object`` (a
    JSON object per call, its name under ``name_key`` and its arguments under ``args_key``; under ``wrapper`` of an
    outer object when there is one), ``json_list`` (every call such an object in one JSON list), ``json_args`` (the
    name, then the arguments as one JSON object) or ``pairs`` (the name, then one element per argument); ``""`` when
    none was found. ``missing`` lists what could not be derived, each with why; ``derived_from`` says which renders
    each literal was read from; ``sections`` holds each render's tool section."""

    shape: str = ""
    section_start: str = ""
    section_end: str = ""
    call_start: str = ""
    call_end: str = ""
    call_sep: str = ""
    name_prefix: str = ""
    name_suffix: str = ""
    # pairs
    key_prefix: str = ""
    key_suffix: str = ""
    key_suffix_typed: str = ""  # a typing attribute: the key suffix before a value other than a string ("": the same)
    value_suffix: str = ""
    arg_sep: str = ""
    strings: str = ""  # raw (as written), json (quoted), python ('quoted') or quoted (between quote_open and quote_close)
    literals: str = ""  # json (true, [..]), python (True, [..]) or quoted (bare keys, strings between the quote tokens)
    quote_open: str = ""
    quote_close: str = ""
    compact_json: bool = False  # JSON written with no space after , and :
    # json_object / json_list
    name_key: str = ""
    args_key: str = ""
    args_as_text: bool = False  # the arguments are a JSON string holding the object
    wrapper: str = ""  # the key of an outer object that holds each call object
    wrapper_fields: dict[str, Any] = field(default_factory=dict)  # the outer object's other members, the same per call
    keyed: bool = False  # each call object is {NAME: arguments} (no name or arguments key)
    # ids and reasoning
    id_key: str = ""
    id_position: str = ""  # where the call id sits: "" (not written), json_key, wrapper_key, before_name, after_name
    id_suffix: str = ""  # after_name: what follows the id, up to the arguments
    call_header: bool = False  # each call is a message of its own, after a header that names the tool (to=NAME)
    turn_start: str = ""  # what the template writes before and after the text of a plain answer (role header,
    turn_end: str = ""  # end of turn): kept out of the section's literals
    reasoning_start: str = ""
    reasoning_end: str = ""
    generation_prompt: str = ""
    prompt_opens_reasoning: bool = False
    arguments_given_as_text: bool = False  # the template was given the arguments as a JSON string
    missing: list[str] = field(default_factory=list)
    derived_from: dict[str, str] = field(default_factory=dict)
    sections: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return bool(self.shape) and not self.missing

    @property
    def opener(self) -> str:
        return self.call_start + self.name_prefix
