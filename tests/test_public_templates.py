"""llama.cpp's public chat templates through derivation (``benchmarks/bench_public_templates.py``).

The slow test reads every ``models/templates/*.jinja`` of the pinned llama-cpp-python sdist ($TOOL_REFINER_LLAMA_SDIST,
else downloaded with pip into ~/.cache/tool-refiner; skipped when PyPI cannot be reached) and holds what must hold
for each: derivation fails only as documented (``TemplateFailure``), ``Refiner(chat_template=...)`` always starts, no
call is read from prose, and a template whose family is registered derives that family's row or the table says why
not. The quick tests run the same function on templates written here.
"""

from __future__ import annotations

import importlib.util
import io
import os
import sys
import tarfile
from pathlib import Path

import pytest

from refiner import formats
from refiner.formats import catalog

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_public_templates", ROOT / "benchmarks" / "bench_public_templates.py")
bench = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(bench)

# Each template of llama-cpp-python 0.3.36 -> the registered family whose format the model writes (the vLLM or SGLang
# parser its makers name, or the layout its template writes), None for a family the catalog does not hold.
FAMILIES: dict[str, str | None] = {
    "Apertus-8B-Instruct.jinja": "apertus",
    "Apriel-1.6-15b-Thinker-fixed.jinja": "jamba",  # ServiceNow Apriel
    "Bielik-11B-v3.0-Instruct.jinja": "hermes",
    "ByteDance-Seed-OSS.jinja": "seed_oss",
    "Cohere2MoE.jinja": "command_a",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "command_r_plus",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "command_a",
    "GLM-4.6.jinja": "glm45",
    "GLM-4.7-Flash.jinja": "glm45",
    "GigaChat3-10B-A1.8B.jinja": "gigachat3",
    "GigaChat3.1-10B-A1.8B.jinja": "gigachat31",
    "HuggingFaceTB-SmolLM3-3B.jinja": None,  # its template writes no calls
    "Kimi-K2-Instruct.jinja": "kimi_k2",
    "Kimi-K2-Thinking.jinja": "kimi_k2",
    "Kimi-K3.jinja": "kimi_k3",
    "LFM2-8B-A1B.jinja": "lfm2",
    "LFM2.5-8B-A1B.jinja": "lfm2",
    "LFM2.5-Instruct.jinja": "lfm2",
    "MiMo-VL.jinja": "hermes",
    "MiniMax-M1.jinja": "minimax",
    "MiniMax-M2.jinja": "minimax_m2",
    "MiniMax-M3.jinja": "minimax_m3",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral_v11",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": "qwen3_coder",
    "NVIDIA-Nemotron-Nano-v2.jinja": "nemotron",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
    "Qwen-QwQ-32B.jinja": "hermes",
    "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes",
    "Qwen-Qwen3-0.6B.jinja": "hermes",
    "Qwen3-Coder.jinja": "qwen3_coder",
    "Qwen3.5-4B.jinja": "qwen3_coder",
    "Reka-Edge.jinja": "hermes",
    "Spark2.5.jinja": "glm45",
    "StepFun3.5-Flash.jinja": "qwen3_coder",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek_v3",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek_v3",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek_v31",
    "deepseek-ai-DeepSeek-V3.2.jinja": "deepseek_v32",
    "deepseek-ai-DeepSeek-V4-Flash-0731.jinja": "deepseek_v4",
    "deepseek-ai-DeepSeek-V4.jinja": "deepseek_v4",
    "fireworks-ai-llama-3-firefunction-v2.jinja": "phi4_mini",  # FireFunction v2 (functools[...])
    "google-gemma-2-2b-it.jinja": None,  # no tools
    "google-gemma-4-31B-it-interleaved.jinja": "gemma4",
    "google-gemma-4-31B-it.jinja": "gemma4",
    "ibm-granite-granite-3.3-2B-Instruct.jinja": "granite",
    "ibm-granite-granite-4.0.jinja": "hermes",
    "ibm-granite-granite-4.1.jinja": "hermes",
    "inclusionai-ling-3.0-flash.jinja": "glm45",
    "llama-cpp-deepseek-r1.jinja": "deepseek_v3",
    "llama-cpp-rwkv-world.jinja": None,  # no tools
    "meetkai-functionary-medium-v3.1.jinja": "functionary_v31",
    "meetkai-functionary-medium-v3.2.jinja": "functionary_v32",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3_json",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3_json",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3_json",
    "microsoft-Phi-3.5-mini-instruct.jinja": None,  # no tools
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "mistral_v11",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral_tekken",
    "moonshotai-Kimi-K2.jinja": "kimi_k2",
    "muse-glimmer.jinja": "muse_glimmer",
    "openai-gpt-oss-120b.jinja": "harmony",
    "openbmb-MiniCPM5-1B.jinja": "minicpm5",
    "poolside-Laguna-S-2.1.jinja": "glm45",
    "poolside-Laguna-XS-2.1.jinja": "glm45",
    "poolside-Laguna-XS.2.jinja": "glm45",
    "tencent-Hy3.jinja": "hunyuan_v3",
    "unsloth-Apriel-1.5.jinja": "jamba",  # ServiceNow Apriel
    "unsloth-mistral-Devstral-Small-2507.jinja": "mistral_v11",
    "upstage-Solar-Open-100B.jinja": "solar_open",
}

# Written for these tests: calls in the key/value layout of GLM's row, one element pair per argument.
PAIRS_TEMPLATE = """{#- a made-up assistant that writes each call as an op element pair list -#}
{%- for m in messages %}
{%- if m.role == 'user' %}[ASK]{{ m.content }}[/ASK]
{%- elif m.role == 'assistant' %}[SAY]{{ m.content or '' }}
{%- for tc in m.tool_calls or [] %}
<tool_call>{{ tc.function.name }}
{% for k, v in tc.function.arguments.items() %}
<arg_key>{{ k }}</arg_key>
<arg_value>{{ v if v is string else v | tojson }}</arg_value>
{% endfor %}
</tool_call>
{%- endfor %}[/SAY]
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}[SAY]{% endif %}"""
BROKEN_TEMPLATE = "{% for m in messages %}{{ m.content }}"  # a loop never closed: does not compile
PLAIN_TEMPLATE = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"  # writes no calls


def _sdist(folder: Path, templates: dict[str, str]) -> Path:
    path = folder / "tiny-0.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in {**templates, "README.md": "not a template"}.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"tiny-0.0{bench.TEMPLATES_DIR}{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_families_name_registered_formats():
    registered = set(formats.names())
    assert {f for f in FAMILIES.values() if f is not None} <= registered


def test_survey_of_templates_written_here(tmp_path):
    sdist = _sdist(tmp_path, {"pairs.jinja": PAIRS_TEMPLATE, "broken.jinja": BROKEN_TEMPLATE,
                              "plain.jinja": PLAIN_TEMPLATE})
    before = formats.names()
    entries = {e.template: e for e in bench.survey(sdist, {"pairs.jinja": "glm45", "broken.jinja": "hermes"})}
    assert formats.names() == before  # nothing registered stays behind
    assert sorted(entries) == ["broken.jinja", "pairs.jinja", "plain.jinja"]
    pairs, broken, plain = entries["pairs.jinja"], entries["broken.jinja"], entries["plain.jinja"]
    assert (pairs.result, pairs.same_as, pairs.equal, pairs.why_not, pairs.used) == ("row", "glm45", True, "", "glm45")
    assert pairs.read_by[0] == "glm45" and len(pairs.sha256) == 64
    assert broken.result == "failed" and "does not parse" in broken.why
    assert broken.equal is False and broken.why_not.startswith("nothing derived: ")
    assert broken.used is None and not broken.refused  # detection per request, not a refusal
    assert plain.result == "special" and plain.why and plain.family is None and plain.equal is None
    assert all(not e.prose_calls for e in entries.values())

    table = bench.markdown(list(entries.values()), sdist.name)
    assert table.splitlines()[2].startswith("3 templates: 1 derived as a grammar row (1 equal to a built-in row)")
    assert "2 of a registered family, 1 of them derive that family's row, 0 are named with their sha256 by that " \
        "row; 0 refused" in table
    assert sum(1 for line in table.splitlines() if line.startswith("| ") and ".jinja" in line) == 3


HERMES = (ROOT / "tests" / "corpus" / "templates" / "hermes.jinja").read_text(encoding="utf-8")


def test_reading_policies_are_the_rows_and_markup_is_compared(tmp_path):
    """Hermes' row reads untagged calls and leaves tags written wrong alone: no template says so, so a template in
    its layout derives its row, the table naming those policies; a template writing one newline less does not."""
    tight = HERMES.replace("}}}\n</tool_call>", "}}}</tool_call>")
    assert tight != HERMES
    sdist = _sdist(tmp_path, {"hermes.jinja": HERMES, "tight.jinja": tight})
    entries = {e.template: e for e in bench.survey(sdist, {"hermes.jinja": "hermes", "tight.jinja": "hermes"})}
    same, other = entries["hermes.jinja"], entries["tight.jinja"]
    assert (same.equal, same.why_not, same.policy) == (True, "", "respell=False, untagged=True")
    assert other.equal is False and other.why_not == "spelling (derived vs catalog): trail: '' vs '\\n'"
    assert other.policy == "respell=False, untagged=True"


# Written for these tests: DeepSeek V3's fenced layout, a token of the template's own written right after the calls'
# section (the section's closer is the first token of the two).
FENCED_TEMPLATE = """{%- for m in messages %}
{%- if m.role == 'user' %}<|ask|>{{ m.content }}
{%- elif m.role == 'assistant' %}<|say|>{{ m.content or '' }}
{%- if m.tool_calls %}<｜tool▁calls▁begin｜>
{%- for tc in m.tool_calls %}{% if not loop.first %}{{ '\\n' }}{% endif %}<｜tool▁call▁begin｜>function<｜tool▁sep｜>
{{- tc.function.name }}{{ '\\n```json\\n' }}{{ tc.function.arguments | tojson }}{{ '\\n```' }}<｜tool▁call▁end｜>
{%- endfor %}<｜tool▁calls▁end｜><|calls_done|>{% endif %}<|end|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|say|>{% endif %}"""


def test_deepseek_v3_is_a_named_json_row_read_by_its_own_readers(tmp_path):
    sdist = _sdist(tmp_path, {"fenced.jinja": FENCED_TEMPLATE})
    (e,) = bench.survey(sdist, {"fenced.jinja": "deepseek_v3"})
    assert (e.result, e.same_as, e.equal, e.used) == ("row", "deepseek_v3", True, "deepseek_v3")
    assert e.policy.startswith("loose=True")  # its reading policies, which no template says


# Written for these tests: every call an object whose one key is the tool name, in one list between Apertus' tokens.
KEYED_TEMPLATE = """{%- for m in messages %}
{%- if m.role == 'user' %}<|u|>{{ m.content }}<|e|>
{%- elif m.role == 'assistant' %}<|a|>{{ m.content or '' }}
{%- if m.tool_calls %}<|tools_prefix|>[
{%- for tc in m.tool_calls %}{{ ', ' if not loop.first }}{{ {tc.function.name: tc.function.arguments} | tojson }}
{%- endfor %}]<|tools_suffix|>{% endif %}<|e|>
{%- endif %}
{%- endfor %}"""


def test_a_call_object_keyed_by_its_name_derives_the_keyed_row(tmp_path):
    sdist = _sdist(tmp_path, {"keyed.jinja": KEYED_TEMPLATE})
    (e,) = bench.survey(sdist, {"keyed.jinja": "apertus"})
    assert (e.result, e.same_as, e.equal) == ("row", "apertus", True)


# Written for these tests: Mistral's JSON list of calls, each with its nine-character id, in the layout of a Tekken
# tokenizer (no space between [TOOL_CALLS] and the list) or of a SentencePiece one (a space).
TEKKEN_TEMPLATE = """{%- for m in messages %}
{%- if m.role == 'user' %}[INST]{{ m.content }}[/INST]
{%- elif m.tool_calls %}[TOOL_CALLS][
{%- for tc in m.tool_calls %}{{ ', ' if not loop.first }}{{ (tc.function | tojson)[:-1] }}, "id": "{{ tc.id }}"}
{%- endfor %}]</s>
{%- else %}{{ m.content }}</s>
{%- endif %}
{%- endfor %}"""


def test_mistrals_list_derives_the_row_of_its_tokenizers_spacing(tmp_path):
    spaced = TEKKEN_TEMPLATE.replace("[TOOL_CALLS][", "[TOOL_CALLS] [")
    sdist = _sdist(tmp_path, {"tekken.jinja": TEKKEN_TEMPLATE, "spaced.jinja": spaced})
    got = {e.template: e for e in bench.survey(sdist, {"tekken.jinja": "mistral_tekken", "spaced.jinja": "mistral"})}
    for name, family in (("tekken.jinja", "mistral_tekken"), ("spaced.jinja", "mistral")):
        assert (got[name].same_as, got[name].equal, got[name].used) == (family, True, family), name


# Written for these tests: one call per turn as a message of its own, the recipient before the channel and the
# content type without its constrain token (gpt-oss's chat template's header).
HARMONY_TEMPLATE = """{%- for m in messages %}
{%- if m.role == 'user' %}<|start|>user<|message|>{{ m.content }}<|end|>
{%- elif m.tool_calls %}<|start|>assistant to=functions.{{ m.tool_calls[0].function.name }}<|channel|>commentary json
{{- '<|message|>' }}{{ m.tool_calls[0].function.arguments | tojson }}<|call|>
{%- else %}<|start|>assistant<|channel|>final<|message|>{{ m.content }}<|end|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|start|>assistant{% endif %}"""

# Written for these tests: GigaChat's messages, the turn's first call after the assistant's text behind
# <|function_call|> (GigaChat 3.1's template; GigaChat 3 writes a "function call" message instead).
FUNCTION_CALL_TEMPLATE = """{%- for m in messages %}{{ m.role }}<|role_sep|>
{{ m.content or '' }}
{%- if m.tool_calls %}<|function_call|>{{ {'name': m.tool_calls[0].function.name,
    'arguments': m.tool_calls[0].function.arguments} | tojson }}{% endif %}<|message_sep|>

{% endfor %}
{%- if add_generation_prompt %}assistant<|role_sep|>
{% endif %}"""


def _derive_their_rows(tmp_path, templates: dict[str, tuple[str, str]]) -> None:
    """Each template (name: (text, family)) derives its family's row, used as it, and reads no call from prose."""
    sdist = _sdist(tmp_path, {name: text for name, (text, _) in templates.items()})
    got = {e.template: e for e in bench.survey(sdist, {name: family for name, (_, family) in templates.items()})}
    for name, (_, family) in templates.items():
        e = got[name]
        assert (e.result, e.same_as, e.equal, e.used) == ("row", family, True, family), (name, e.why, e.why_not)
        assert not e.prose_calls


def test_one_call_per_turn_templates_derive_the_rows_that_write_that_call(tmp_path):
    """gpt-oss's header order derives the harmony row, GigaChat 3.1's token its own row (not gigachat3's, which
    only reads it)."""
    _derive_their_rows(tmp_path, {"harmony.jinja": (HARMONY_TEMPLATE, "harmony"),
                                  "call_token.jinja": (FUNCTION_CALL_TEMPLATE, "gigachat31")})


# Written for these tests: each call a message of its own whose header names the tool (as the turn's header names
# its recipient), then an XML block that names it again, each ended by <|more|> but the last.
HEADED_TEMPLATE = """{%- for m in messages %}
{%- if m.role == 'user' %}<|open|>user<|body|>{{ m.content }}<|done|>
{%- elif m.tool_calls %}{% for tc in m.tool_calls %}<|open|>assistant for={{ tc.function.name }}<|body|>
{{- '<atem:function_calls>\\n<atem:invoke name="' + tc.function.name + '">\\n' }}
{%- for k, v in tc.function.arguments.items() %}<atem:parameter name="{{ k }}">
{{- v if v is string else v | tojson }}</atem:parameter>{{ '\\n' }}{% endfor %}</atem:invoke>
{{- '\\n</atem:function_calls>' }}{{ '<|done|>' if loop.last else '<|more|>' }}
{%- endfor %}
{%- else %}<|open|>assistant for=user<|body|>{{ m.content }}<|done|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|open|>assistant{% endif %}"""

# Written for these tests: Functionary v3.1's calls, <function=NAME>{...}</function> one after another right after
# the text, the turn ended by <|wait|> (a turn with no call by <|stop|>).
TAG_OPENED_TEMPLATE = """{%- for m in messages %}
{%- if m.role == 'user' %}<|head|>user<|sep|>{{ m.content }}<|stop|>
{%- else %}<|head|>assistant<|sep|>{{ m.content or '' }}
{%- if m.tool_calls %}{% for tc in m.tool_calls %}<function={{ tc.function.name }}>{{ tc.function.arguments | tojson }}
{{- '</function>' }}{% endfor %}<|wait|>{% else %}<|stop|>{% endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|head|>assistant<|sep|>{% endif %}"""


def test_a_header_naming_each_call_and_a_turn_end_after_calls_derive_the_rows(tmp_path):
    """The header that names the tool before the block is no part of the call (muse_glimmer's block, read with the
    headers as text between calls); the token that ends a turn with calls where another ends one without is the
    turn's end, not a section's (functionary_v31's calls, their tag a marker wherever it is written)."""
    _derive_their_rows(tmp_path, {"headed.jinja": (HEADED_TEMPLATE, "muse_glimmer"),
                                  "tag_opened.jinja": (TAG_OPENED_TEMPLATE, "functionary_v31")})


# Written for these tests: a label line, then all calls in one JSON list inside a JSON code fence (Command R+'s
# layout), or a label line and a fence around each call object (RWKV's): a fence alone is no marker, so the section
# or the call opens with the label's line and the fence's line.
LABELLED_FENCE_TEMPLATE = """{%- for m in messages %}
{%- if m.role == 'user' %}<|u|>{{ m.content }}<|end|>
{%- elif m.role == 'assistant' %}<|a|>{{ m.content or '' }}
{%- if m.tool_calls %}
Action:
```json
[{% for tc in m.tool_calls %}{{ ', ' if not loop.first }}
{{- {'tool_name': tc.function.name, 'parameters': tc.function.arguments} | tojson }}{% endfor %}]```
{% endif %}<|end|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|a|>{% endif %}"""
FENCE_PER_CALL_TEMPLATE = """{%- for m in messages %}
{%- if m.role == 'user' %}<|u|>{{ m.content }}<|end|>
{%- elif m.role == 'assistant' %}<|a|>{{ m.content or '' }}
{%- for tc in m.tool_calls or [] %}{{ '\\n\\n' if not loop.first }}**Tool Call:**
```json
{{ {'name': tc.function.name, 'arguments': tc.function.arguments} | tojson }}
```
{%- endfor %}<|end|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|a|>{% endif %}"""


def test_a_label_line_before_a_code_fence_opens_the_section_or_the_call(tmp_path):
    _derive_their_rows(tmp_path, {"labelled.jinja": (LABELLED_FENCE_TEMPLATE, "command_r_plus"),
                                  "per_call.jinja": (FENCE_PER_CALL_TEMPLATE, "rwkv")})


def test_a_row_names_the_templates_it_was_checked_against():
    row = next(r for r in catalog.CATALOG if r.family.name == "hermes")
    sha = "87a2728cb8dc" + "0" * 52
    assert bench.named_sha(row, "Qwen-Qwen3-0.6B.jinja", sha) == "yes"
    assert bench.named_sha(row, "Qwen-Qwen3-0.6B.jinja", "f" * 64) == "other sha"
    assert bench.named_sha(row, "pairs.jinja", sha) == ""


def test_script_writes_the_table(tmp_path):
    sdist = _sdist(tmp_path, {"pairs.jinja": PAIRS_TEMPLATE})
    out = tmp_path / "table.md"
    assert bench.main(["--sdist", str(sdist), "--out", str(out)]) == 0
    assert "| pairs.jinja |" in out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def public_entries():
    given = os.environ.get("TOOL_REFINER_LLAMA_SDIST")
    if given:
        sdist = Path(given)
    else:
        try:
            sdist = bench.fetch_sdist()
        except (OSError, TimeoutError) as e:
            pytest.skip(f"PyPI is unreachable, so llama.cpp's templates cannot be had ({e}); "
                        "or set TOOL_REFINER_LLAMA_SDIST to the llama-cpp-python sdist")
    return bench.survey(sdist, FAMILIES)


@pytest.mark.slow
def test_public_templates(public_entries):
    by_name = {e.template: e for e in public_entries}
    assert set(by_name) == set(FAMILIES), "a template was added or removed: give its family in FAMILIES"
    for e in public_entries:
        assert e.result != "crashed", f"{e.template}: derivation raised {e.why}"
        assert e.result != "failed" or e.why, e.template
        assert not e.refused, f"{e.template}: Refiner(chat_template=...) refused to start: {e.refused}"
        assert not e.prose_calls, f"{e.template}: calls read from prose: {e.prose_calls}"
        if e.result == "special":
            assert e.why, f"{e.template}: nothing derived and no reason given"
        if e.equal is not None:
            assert e.equal or e.why_not, f"{e.template}: not {e.family}'s row and no reason given"
        if e.equal:
            assert e.used == e.family, f"{e.template}: derives {e.family}'s row, yet the refiner uses {e.used}"
        # a row names, with its sha256, every public template that derives it, and no other
        assert (e.named == "yes") == bool(e.equal), f"{e.template}: {e.family}'s row names it: {e.named or 'no'}"
