#!/usr/bin/env bash
# FSDP checkpoint -> Hugging Face folder + model card (thin shell over `tool-refiner export`).
#   scripts/merge.sh CKPT_DIR OUT_DIR [--log metrics.jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
ckpt=${1:?usage: scripts/merge.sh CKPT_DIR OUT_DIR [--log FILE]}
out=${2:?usage: scripts/merge.sh CKPT_DIR OUT_DIR [--log FILE]}
shift 2
exec "${PYTHON:-.venv/bin/python}" -m refiner.cli export "$ckpt" --out "$out" "$@"
