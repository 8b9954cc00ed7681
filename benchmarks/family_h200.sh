#!/usr/bin/env bash
# Issue 16, one corpus family and its structural passes on one H200 (docs/DEVICE.md; carry .whl).
# WORKLOAD (the corpus family: skinny_matmul), REWRITES (the passes for structural, chains
# joined by +: output_tiling,output_tiling+split_k), PROBLEMS (the held-out problems searched:
# matmul_long_k_small_mn) and NAME (the results' folder and tarball: outtile) pick the family;
# the defaults are the output_tiling run of 2026-12-04. PHASES (a comma list) picks what one
# device call runs:
#  walk:       the WORKLOAD expert walked backward with side-by-side timing (MAX_STEPS steps,
#              all by default; REGIMES, default build_library.py's), and its forward probes
#              (forward-only passes onto the naive kernel, or onto the kernel another accepted
#              probe made), as rewalk_h200.sh does, beside structural (the gate's lock keeps
#              their timings apart); capped by T_WALK;
#  structural: the REWRITES of the held-out naive kernels that are their sites, each gated
#              beside the naive start (--base); capped by T2;
#  corpus:     the family timed alone afterwards (naive, expert, eager, torch.compile, floor); T1;
#  search:     klineage and random (POLICIES) at budget 10 on PROBLEMS, with the library SKILLS
#              (a skills JSON; default the shipped one); T3.
# Everything lands in $OUT/$NAME.tgz (the device tool returns at most 8 files); the last lines
# print what each phase found.
#   PHASES=walk,structural,corpus bash benchmarks/family_h200.sh
#   PHASES=search SKILLS=benchmarks/results/....json bash benchmarks/family_h200.sh
#   NAME=scan WORKLOAD=cumsum MAX_STEPS=1 REGIMES=short_rows,long_rows,few_rows \
#     REWRITES=split_scan PROBLEMS=reverse_cumsum_rows PHASES=walk,structural bash benchmarks/family_h200.sh
set -u
NAME=${NAME:-outtile} WORKLOAD=${WORKLOAD:-skinny_matmul}
REWRITES=${REWRITES:-output_tiling,output_tiling+split_k}
OUT=${OUT:-$PWD/bench-out}; R=$OUT/$NAME; mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
if ! command -v bwrap >/dev/null && ls .whl/deb/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .whl/deb/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
git rev-parse HEAD > "$R/commit.txt" 2>/dev/null || true
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$R/nvidia-smi.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" > "$R/versions.txt" 2>&1
t0=$(date +%s)
PHASES=,${PHASES:-walk,structural,corpus,search},
has() { case "$PHASES" in *,$1,*) return 0;; *) return 1;; esac; }

if has walk; then
  REGIMES=${REGIMES:-$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import build_library as b; print(b.REGIMES)")}
  mkdir -p "$R/walk"
  OUT=$R/walk KLINEAGE_CACHE_DIR=/tmp/walk-cache timeout "${T_WALK:-390}" python3 benchmarks/distill_corpus.py \
    --device cuda --workloads "$WORKLOAD" --regimes "$REGIMES" --policy first --probe \
    ${MAX_STEPS:+--max-steps "$MAX_STEPS"} > "$R/walk/walk.log" 2>&1 &
fi
if has structural; then
  python3 benchmarks/structural_rewrites.py "/tmp/$NAME" "$REWRITES" > "$R/rewrites.log" 2>&1
  cp "/tmp/$NAME"/*.py "$R/" 2>/dev/null
  OUT=$R T=${T2:-150} bash benchmarks/structural_h200.sh "/tmp/$NAME" > "$R/structural.log" 2>&1
  echo "structural done at $(( $(date +%s) - t0 )) s" >> "$R/status.txt"
fi
wait
if has walk; then
  echo "walk done at $(( $(date +%s) - t0 )) s" >> "$R/status.txt"
  for db in "$R"/walk/*.db; do  # WAL mode: checkpoint before it is brought back
    python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('pragma wal_checkpoint(truncate)'); c.close()" "$db"
    rm -f "$db-wal" "$db-shm"
  done
fi
if has corpus; then
  (cd benchmarks && OUT=$R timeout -k 10 "${T1:-150}" python3 corpus.py --workloads "$WORKLOAD" > "$R/corpus.log" 2>&1)
  echo "corpus exit $? at $(( $(date +%s) - t0 )) s" >> "$R/status.txt"
fi
if has search; then
  OUT=$R T=${T3:-300} BUDGET=10 POLICIES=${POLICIES:-klineage,random} PER_GPU=2 EXTRA=--no-compile \
    PROBLEMS=${PROBLEMS:-matmul_long_k_small_mn} bash benchmarks/search_h200.sh > "$R/search.log" 2>&1
  echo "search done at $(( $(date +%s) - t0 )) s" >> "$R/status.txt"
fi

tar -czf "$OUT/$NAME.tgz" -C "$OUT" "$NAME"
if has walk; then echo "== walk"; tail -15 "$R/walk/walk.log"; fi
if has structural; then echo "== structural"; cat "$R/structural.log"; fi
if has corpus; then echo "== corpus"; grep -v "^\s*$" "$R/corpus.log" | tail -14; fi
if has search; then echo "== search"; tail -25 "$R/search.log"; fi
cat "$R/status.txt"
