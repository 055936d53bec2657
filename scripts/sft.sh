#!/usr/bin/env bash
# Optional SFT warm start on the same triplets (thin shell over `tool-refiner sft`), then export + DAPO:
#   scripts/sft.sh --data data/out --profile gpu24
#   scripts/merge.sh checkpoints/tool-refiner/sft-qwen3-1.7b out/sft-hf
#   scripts/train.sh --data data/out --model out/sft-hf
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" -m refiner.cli sft --config "${CONFIG:-configs/sft/paper.yaml}" "$@"
