#!/usr/bin/env bash
# Run the refining proxy in front of an OpenAI-compatible upstream (a thin shell over `tool-refiner serve`).
#   UPSTREAM=http://127.0.0.1:8000/v1 scripts/serve.sh                       # tier-1 repair + guard only
#   UPSTREAM=... REFINER_URL=http://127.0.0.1:8001/v1 scripts/serve.sh       # refiner behind `vllm serve`
#   UPSTREAM=... MODEL=checkpoints/refiner scripts/serve.sh                  # refiner loaded in-process (vLLM)
# Extra arguments are passed to `tool-refiner serve` (e.g. --port 9000 --thinking).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
: "${UPSTREAM:?set UPSTREAM to the upstream base URL, e.g. http://127.0.0.1:8000/v1}"
args=(--upstream-base-url "$UPSTREAM" --host "${HOST:-127.0.0.1}" --port "${PORT:-8080}")
[[ -n "${REFINER_URL:-}" ]] && args+=(--refiner-base-url "$REFINER_URL")
[[ -n "${MODEL:-}" ]] && args+=(--model "$MODEL")
[[ -n "${ENGINE:-}" ]] && args+=(--engine "$ENGINE")
exec "$PY" -m refiner.cli serve "${args[@]}" "$@"
