#!/usr/bin/env bash
# Issue 16, output_tiling and the skinny_matmul family on one H200 (docs/DEVICE.md; carry .whl).
# PHASES (a comma list) picks what one device call runs:
#  walk:       the skinny_matmul expert walked backward with side-by-side timing, and its
#              forward probes (output_tiling onto the naive kernel), as rewalk_h200.sh does,
#              beside structural (the gate's lock keeps their timings apart); capped by T_WALK;
#  structural: output_tiling, and output_tiling then split_k, on the held-out long-K matmul's
#              naive kernel, each gated beside the naive start (--base); capped by T2;
#  corpus:     the family timed alone afterwards (naive, expert, eager, torch.compile, floor); T1;
#  search:     klineage and random (POLICIES) at budget 10 on the long-K matmul (PROBLEMS), with
#              the library SKILLS (a skills JSON; default the shipped one); T3.
# Everything lands in $OUT/outtile.tgz (the device tool returns at most 8 files); the last lines
# print what each phase found.
#   PHASES=walk,structural,corpus bash benchmarks/outtile_h200.sh
#   PHASES=search SKILLS=benchmarks/results/....json bash benchmarks/outtile_h200.sh
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
PHASES=,${PHASES:-walk,structural,corpus,search},
has() { case "$PHASES" in *,$1,*) return 0;; *) return 1;; esac; }

if has walk; then
  REGIMES=$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import build_library as b; print(b.REGIMES)")
  mkdir -p "$R/walk"
  OUT=$R/walk KLINEAGE_CACHE_DIR=/tmp/walk-cache timeout "${T_WALK:-390}" python3 benchmarks/distill_corpus.py \
    --device cuda --workloads skinny_matmul --regimes "$REGIMES" --policy first --probe > "$R/walk/walk.log" 2>&1 &
fi
if has structural; then
  python3 benchmarks/structural_rewrites.py /tmp/outtile output_tiling,output_tiling+split_k > "$R/rewrites.log" 2>&1
  cp /tmp/outtile/*.py "$R/" 2>/dev/null
  OUT=$R T=${T2:-150} bash benchmarks/structural_h200.sh /tmp/outtile > "$R/structural.log" 2>&1
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
  (cd benchmarks && OUT=$R timeout -k 10 "${T1:-150}" python3 corpus.py --workloads skinny_matmul > "$R/corpus.log" 2>&1)
  echo "corpus exit $? at $(( $(date +%s) - t0 )) s" >> "$R/status.txt"
fi
if has search; then
  OUT=$R T=${T3:-300} BUDGET=10 POLICIES=${POLICIES:-klineage,random} PER_GPU=2 EXTRA=--no-compile \
    PROBLEMS=${PROBLEMS:-matmul_long_k_small_mn} bash benchmarks/search_h200.sh > "$R/search.log" 2>&1
  echo "search done at $(( $(date +%s) - t0 )) s" >> "$R/status.txt"
fi

tar -czf "$OUT/outtile.tgz" -C "$OUT" outtile
if has walk; then echo "== walk"; tail -15 "$R/walk/walk.log"; fi
if has structural; then echo "== structural"; cat "$R/structural.log"; fi
if has corpus; then echo "== corpus"; grep -v "^\s*$" "$R/corpus.log" | tail -14; fi
if has search; then echo "== search"; tail -25 "$R/search.log"; fi
cat "$R/status.txt"
