#!/usr/bin/env bash
# Issue 15 on one H200 (docs/DEVICE.md): the held-out problems whose naive kernels have literal
# block sizes (the tunables pass lifts them into a config space the gate sweeps), optimized by
# klineage (the configs nearest the experts') and random (configs drawn from the same space),
# same budget and gate; device time, side by side, torch.compile timed once per problem.
#   bash benchmarks/search_h200.sh                # carry .whl; results under $OUT/search/
# BUDGET (3), PER_GPU (8), T (520 s), POLICIES (klineage,random), PROBLEMS, SKILLS (a skills JSON
# instead of the shipped library) and EXTRA (more bench options, e.g. --no-compile) override the
# defaults. Cut by the timeout, bench.json holds every run that
# finished (it is written after each run), and search.db every trial (their messages).
# RESUME (a search.db an earlier call brought back, carried) starts from its trials: each run
# replays what it stored without a gate call and goes on, so budget 10 may span device calls.
# The 2026-12-01 run (docs/benchmarks.md "Search space"):
#   BUDGET=2 PER_GPU=4 T=470 EXTRA=--no-compile PROBLEMS=matmul_bias_gelu,gemv,batched_matmul,attention_d32 bash benchmarks/search_h200.sh
set -u
OUT=${OUT:-$PWD/bench-out}; R=$OUT/search; mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src KLINEAGE_DB=/tmp/search.db KLINEAGE_CACHE_DIR=/tmp/search-cache
if [ -n "${RESUME:-}" ]; then cp "$RESUME" /tmp/search.db && echo "resuming from $RESUME" >> "$R/status.txt"; fi
if ! command -v bwrap >/dev/null && ls .whl/deb/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .whl/deb/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
DEFAULT=attention_causal_d128_short,attention_d32,attention_gqa,attention_scaled_custom,batched_matmul,gemv,linear_nt,linear_residual,matmul_bias_gelu,matmul_bias_relu,matmul_tall_skinny_fp32
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$R/nvidia-smi.txt" 2>&1
# This card's ceilings, recorded always; OWN_FLOOR=1 makes the gate's % of floor this card's own
# (by default it is the H200's on every card: docs/benchmarks.md "The floor on an H100").
python3 benchmarks/card_ceilings.py > "$R/ceilings.json" 2>> "$R/status.txt" || true
if [ -n "${OWN_FLOOR:-}" ] && [ -s "$R/ceilings.json" ]; then eval "$(python3 benchmarks/card_ceilings.py --exports "$R/ceilings.json")"; fi
# The versions and any error above go to status.txt: the device tool brings back at most 8
# files from $OUT (2026-12-07: versions.txt, the ninth, was left out).
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$R/status.txt" 2>&1
[ -f COMMIT ] && echo "klineage $(cat COMMIT) (benchmarks/freeze.sh)" >> "$R/status.txt"
# The store is in WAL mode: a plain copy of the .db file can miss every trial, so it is copied
# by SQLite's backup. Every 60 s as well as at the end: a call the device tool cuts short (its
# limit is the time left to the session, which can be under T) still brings back each trial
# finished so far (2026-12-04: a call cut at 524 s with T=540 brought back nothing).
backup() { python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))" /tmp/search.db "$R/search.db" 2>/dev/null; }
( while sleep 60; do backup; done ) & SAVER=$!
t0=$(date +%s)
timeout "${T:-520}" python3 -m klineage bench --suite heldout --device cuda --policies "${POLICIES:-klineage,random}" \
  --budget "${BUDGET:-3}" ${SKILLS:+--skills "$SKILLS"} ${EXTRA:-} --per-gpu "${PER_GPU:-8}" --problems "${PROBLEMS:-$DEFAULT}" --out "$R" > "$R/bench.log" 2>&1
echo "bench exit $? after $(( $(date +%s) - t0 )) s" >> "$R/status.txt"
pkill -f "python3 -m klineage|multiprocessing.spawn|klineage.gate.worker" 2>/dev/null
kill $SAVER 2>/dev/null; backup
tail -40 "$R/bench.log"; cat "$R/status.txt"
