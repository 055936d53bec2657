#!/usr/bin/env bash
# DAPO training of the refiner on verl 0.9.1 (thin shell over `tool-refiner train`).
#   scripts/train.sh --data data/out --profile gpu24 [--model Qwen/Qwen3-1.7B] [--dry-run] [key=value ...]
#   scripts/train.sh --data /shared/data/out --profile multinode --ray-address http://HEAD:8265
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" -m refiner.cli train --config "${CONFIG:-configs/verl/paper.yaml}" "$@"
