#!/usr/bin/env bash
# CPU rehearsal of the real trainer (toy size, ~10 min on 2 cores): data build -> tiny Qwen3 -> verl's main_ppo with
# the recipe's cpu-rehearsal profile (2 DAPO steps through vLLM's CPU build) -> export -> plot. Test support only:
# the CPU shims it loads (tests/support/verl_cpu_shims.py) are never part of a GPU launch.
#   scripts/rehearse_cpu.sh --out /tmp/rehearsal [--shared-data ../shared/data] [key=value ...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" tests/support/cpu_rehearsal.py "$@"
