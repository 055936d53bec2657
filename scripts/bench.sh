#!/usr/bin/env bash
# Runs the benchmarks at full size and writes each one's results to benchmarks/results/ (bench_NAME.txt, what it
# prints; bench_proxy.json, bench_public_templates.md and bench_refine_peer.md, the files they write).
#   scripts/bench.sh                  every benchmark (several hours on 2 cores)
#   scripts/bench.sh formats tools    only bench_formats.py and bench_tools.py
#   BENCH_OUT=DIR BENCH_ARGS="--limit 3" scripts/bench.sh dialects    elsewhere, with extra arguments
# Peers outside the test stack are fetched into .cache: SGLang 0.5.23's detectors (no dependencies) and the
# llama-cpp-python sdist (its templates).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
OUT=${BENCH_OUT:-benchmarks/results}
SGLANG=.cache/peers/sglang
read -ra EXTRA <<< "${BENCH_ARGS:-}"
mkdir -p "$OUT"
names=("$@")
[ ${#names[@]} -gt 0 ] || names=($(ls benchmarks/bench_*.py | sed 's|.*/bench_||; s|\.py$||'))
for n in "${names[@]}"; do
  t0=$SECONDS
  run=(env PYTHONPATH="$PWD" "$PY" "benchmarks/bench_$n.py" "${EXTRA[@]}")
  case $n in
    refine_peer)
      [ -d "$SGLANG" ] || "$PY" -m pip install -q --no-deps --target "$SGLANG" "sglang==0.5.23"
      "${run[@]}" --sglang-path "$SGLANG" --out "$OUT/bench_$n.md" ;;
    public_templates) "${run[@]}" --download --out "$OUT/bench_$n.md" ;;
    proxy) "${run[@]}" --out "$OUT/bench_$n.json" ;;
    *) "${run[@]}" > "$OUT/bench_$n.txt" ;;
  esac
  echo "bench_$n: $((SECONDS - t0)) s"
done
