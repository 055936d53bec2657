#!/usr/bin/env bash
# The main job on its embedded default: installs the core package (no GPU, no model needed) and runs tier-1 repair
# on the bundled broken upstream outputs, printing what was fixed. Extra arguments go to `tool-refiner repair`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q -e . 2>&1 | grep -v "WARNING: Location" || true
exec .venv/bin/tool-refiner repair "$@"
