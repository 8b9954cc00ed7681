#!/usr/bin/env bash
# Issue 16 on one H200 (docs/DEVICE.md; carry .whl): the forward-only passes' "when", measured
# where optimize starts. The colsum, cumsum and transpose experts are each walked one step
# (`distill_corpus.py --max-steps 1 --probe`, policy first), side by side in three processes;
# their forward-only passes (split_k, block_scan, tiled_transpose) have no place in a kernel that
# keeps the expert's structure, so each is added to the family's naive kernel and gated beside
# it (lineage/probe.py) on four or five GPU regimes: the probe's ratio is the skill's effect there.
#   bash benchmarks/forward_probes_h200.sh          # logs under $OUT/probes/<workload>/
# T (420 s) caps the three walks; WORKLOADS (default "colsum cumsum transpose") picks them; REGIMES overrides the regimes (each workload keeps its own).
# Each walk's database is copied to $OUT/probes/<workload>.db; then, here:
# benchmarks/build_library.py --base ... --db $OUT/probes/<workload>.db (its docstring).
set -u
OUT=${OUT:-$PWD/bench-out}; R=$OUT/probes; mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
if ! command -v bwrap >/dev/null && ls .whl/deb/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .whl/deb/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
REGIMES=${REGIMES:-tall,narrow,wide,square,fp32,large,short_rows,long_rows,few_rows,tall_gpu,odd_fp32}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$R/nvidia-smi.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" > "$R/versions.txt" 2>&1
t0=$(date +%s)
for w in ${WORKLOADS:-colsum cumsum transpose}; do
  mkdir -p "$R/$w"
  OUT=$R/$w KLINEAGE_CACHE_DIR=/tmp/probe-cache-$w timeout "${T:-420}" python3 benchmarks/distill_corpus.py \
    --device cuda --workloads "$w" --regimes "$REGIMES" --max-steps 1 --probe > "$R/$w/log.txt" 2>&1 &
done
wait
echo "walks done after $(( $(date +%s) - t0 )) s" >> "$R/status.txt"
for w in ${WORKLOADS:-colsum cumsum transpose}; do  # WAL mode: a plain copy can miss rows
  python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))" \
    "$R/$w/distill.db" "$R/$w.db"
  tail -12 "$R/$w/log.txt"
done
cat "$R/status.txt"
