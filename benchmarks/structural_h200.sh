#!/usr/bin/env bash
# Issue 16: the structural forward passes' rewrites of held-out naive kernels, gated on the H200
# beside their naive start (side by side: --base), all at once, each capped at T seconds.
#   bash benchmarks/structural_h200.sh DIR     # DIR/<problem>__<pass>.py, made by
#   python benchmarks/structural_rewrites.py DIR (on any machine; the rewrites are text)
# Each verdict goes to $OUT/structural/<problem>__<pass>.json (speedup over the naive start per
# regime, device and host time, % of the roofline floor, eager and torch.compile times).
set -uo pipefail
DIR=${1:?usage: structural_h200.sh DIR} T=${T:-420}
OUT=${OUT:-$PWD/bench-out}; mkdir -p "$OUT/structural"
for f in "$DIR"/*__*.py; do
  name=$(basename "$f" .py); problem=${name%%__*}
  H=src/klineage/heldout/$problem
  timeout -k 10 "$T" python3 -m klineage gate "$H/problem.py" "$f" --device cuda --base "$H/naive.py" \
    --json > "$OUT/structural/$name.json" 2> "$OUT/structural/$name.err" &
done
wait
python3 benchmarks/verdicts.py "$OUT/structural" || true
