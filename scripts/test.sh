#!/usr/bin/env bash
# Sets up .venv from scratch (idempotent) and runs the test suite.
#   scripts/test.sh            default suite (fast tests, 2 workers), then the slow ones when CI=true or SLOW=1
#   scripts/test.sh -k rewards extra pytest arguments go to both runs
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup-env.sh
PY=.venv/bin/python
run() {  # pytest exit 5 means "no test collected": not a failure for an optional slice
  set +e; "$PY" -m pytest "$@"; rc=$?; set -e
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi
}
# the default suite on TEST_WORKERS processes (2: CI's cores), a file per worker (a module's fixtures stay in one);
# TEST_WORKERS=0 runs it in this process
WORKERS=${TEST_WORKERS:-2}
if [ "$WORKERS" = "0" ]; then run -q -m "not slow" "$@"; else run -q -m "not slow" -n "$WORKERS" --dist loadfile "$@"; fi
if [ "${CI:-}" = "true" ] || [ "${SLOW:-}" = "1" ]; then
  run -q -m slow "$@"
fi
