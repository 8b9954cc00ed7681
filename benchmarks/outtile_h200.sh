#!/usr/bin/env bash
# Issue 16, output_tiling on one H200 (docs/DEVICE.md; carry .whl), in one device call:
#  1. the skinny_matmul corpus family timed (naive, expert, eager, torch.compile, floor);
#  2. output_tiling, and output_tiling then split_k, on the held-out long-K matmul's naive
#     kernel, each gated beside the naive start (side by side: --base);
#  3. klineage (and random) at budget 10 on the long-K matmul, with the library SKILLS (a skills
#     JSON; default the shipped one).
# Everything lands in $OUT/outtile.tgz (the device tool returns at most 8 files); the last lines
# print what each phase found. T1, T2, T3 cap the phases (seconds).
#   bash benchmarks/outtile_h200.sh
set -u
OUT=${OUT:-$PWD/bench-out}; R=$OUT/outtile; mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
if ! command -v bwrap >/dev/null && ls .whl/deb/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .whl/deb/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
git rev-parse HEAD > "$R/commit.txt" 2>/dev/null || true
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$R/nvidia-smi.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" > "$R/versions.txt" 2>&1
t0=$(date +%s)

(cd benchmarks && OUT=$R timeout -k 10 "${T1:-170}" python3 corpus.py --workloads skinny_matmul > "$R/corpus.log" 2>&1)
echo "corpus exit $? at $(( $(date +%s) - t0 )) s" >> "$R/status.txt"

python3 benchmarks/structural_rewrites.py /tmp/outtile output_tiling,output_tiling+split_k > "$R/rewrites.log" 2>&1
cp /tmp/outtile/*.py "$R/" 2>/dev/null
OUT=$R T=${T2:-150} bash benchmarks/structural_h200.sh /tmp/outtile > "$R/structural.log" 2>&1
echo "structural done at $(( $(date +%s) - t0 )) s" >> "$R/status.txt"

OUT=$R T=${T3:-300} BUDGET=10 POLICIES=${POLICIES:-klineage,random} PER_GPU=2 EXTRA=--no-compile \
  PROBLEMS=${PROBLEMS:-matmul_long_k_small_mn} bash benchmarks/search_h200.sh > "$R/search.log" 2>&1
echo "search done at $(( $(date +%s) - t0 )) s" >> "$R/status.txt"

tar -czf "$OUT/outtile.tgz" -C "$OUT" outtile
echo "== corpus"; grep -v "^\s*$" "$R/corpus.log" | tail -12
echo "== structural"; cat "$R/structural.log"
echo "== search"; tail -25 "$R/search.log"
cat "$R/status.txt"
