#!/usr/bin/env bash
# Sets up .venv from scratch (idempotent) and runs the test suite.
#   scripts/test.sh            default suite (fast tests, 2 workers), then the slow ones when CI=true or SLOW=1,
#                              then the fast ones on Python 3.10 (.venv310) when CI=true or PY310=1
#   LONG=1 scripts/test.sh     also the long proofs (marker `long`: the slow tests at full size, ~11 min)
#   scripts/test.sh -k rewards extra pytest arguments go to every run
# Prints each phase's time at the end, then the passed and failed tests of all runs on one line.
set -euo pipefail
cd "$(dirname "$0")/.."
LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT
PHASES=()
phase() {  # phase NAME COMMAND...: runs it, keeps its time
  local t0=$SECONDS
  "${@:2}"
  PHASES+=("$1 $((SECONDS - t0))s")
}
PY=.venv/bin/python
pytest_run() {  # pytest exit 5 means "no test collected": not a failure for an optional slice
  local name=$1; shift
  set +e; "$PY" -m pytest "$@" 2>&1 | tee "$LOG/$name"; local rc=${PIPESTATUS[0]}; set -e
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then summary; exit "$rc"; fi
}
summary() {
  echo "phase times: ${PHASES[*]:-none} (total $SECONDS s)"
  "$PY" - "$LOG" <<'EOF'
import re, sys
from pathlib import Path
n = {"passed": 0, "failed": 0}
for f in Path(sys.argv[1]).iterdir():
    lines = [l for l in f.read_text(errors="replace").splitlines() if re.search(r"\d+ (passed|failed|error)", l)]
    for count, word in re.findall(r"(\d+) (passed|failed|errors?)\b", lines[-1] if lines else ""):
        n["passed" if word == "passed" else "failed"] += int(count)
print(f"tests: {n['passed']} passed, {n['failed']} failed")
EOF
}
# A Python 3.10 that runs: PYTHON310, else python3.10 on PATH, else pyenv's (a pyenv shim is on PATH whether or not
# its version is selected, and runs only when it is).
python310() {
  local p
  for p in ${PYTHON310:-} python3.10 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10*/bin/python3.10; do
    if "$p" -c "" 2>/dev/null; then echo "$p"; return; fi
  done
}
py310_run() {  # py310_run PYTHON ARGS...: .venv310 made by PYTHON (3.10) with the library, its proxy and test tools
  [ -x .venv310/bin/python ] || "$1" -m venv .venv310  # (pinned in constraints/py310-test.txt)
  shift
  .venv310/bin/python -m pip install -q -c constraints/py310-test.txt -e ".[data]" pytest pytest-xdist pytest-timeout \
    hypothesis canitoolcall fastapi uvicorn httpx prometheus_client matplotlib tokenizers
  PY=.venv310/bin/python pytest_run py310 -q -m "not slow and not long" "$@"
}
phase setup bash .ci/setup-env.sh
# TEST_WORKERS processes (2: CI's cores; 0 runs in this process), a module per worker (a module's fixtures stay in
# one), the two DAPO runs (~11 GB each) on one worker, one after the other (tests/conftest.py). A worker that dies
# fails its test and is not replaced: xdist 3.8's by-file scheduler hangs after replacing one (pytest-xdist#1323).
WORKERS=${TEST_WORKERS:-2}
dist=()
if [ "$WORKERS" != "0" ]; then dist=(-n "$WORKERS" --dist loadfile --max-worker-restart=0); fi
phase default pytest_run default -q -m "not slow and not long" "${dist[@]}" --durations=15 "$@"
if [ "${CI:-}" = "true" ] || [ "${SLOW:-}" = "1" ]; then
  phase slow pytest_run slow -q -m "slow and not long" "${dist[@]}" --durations=15 "$@"
fi
if [ "${CI:-}" = "true" ] || [ "${PY310:-}" = "1" ]; then  # the oldest supported Python: the library's own tests
  py310=$(python310)
  if [ -n "$py310" ]; then
    phase py310 py310_run "$py310" "${dist[@]}" "$@"
  else
    echo "py310: no Python 3.10 on this machine (PYTHON310=PATH names one); the oldest supported Python was not tested"
  fi
fi
if [ "${LONG:-}" = "1" ]; then
  phase long pytest_run long -q -m long "${dist[@]}" --durations=15 "$@"
fi
summary
