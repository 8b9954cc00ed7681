#!/usr/bin/env bash
# Issue 14's re-walk on one H200 (docs/DEVICE.md; carry .whl): the six corpus experts walked
# backward again with the side-by-side device timing, one process per expert at once (gate
# calls share the GPU through its lock), each in its own database under $OUT/rewalk/<expert>/
# so a walk cut by T resumes: carry a folder the last call brought back as RESUME (its
# distill.db files are copied in first). Two GPU regimes per expert, as build_library.py's
# REGIMES. Then, here: build_library.py --db .../<expert>/distill.db ... (docs/SKILLS.md).
#   T=520 bash benchmarks/rewalk_h200.sh
#   RESUME=bench-out/rewalk T=430 bash benchmarks/rewalk_h200.sh    # the next call goes on
set -u
OUT=${OUT:-$PWD/bench-out}; R=$OUT/rewalk; mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src KLINEAGE_CACHE_DIR=/tmp/rewalk-cache
if ! command -v bwrap >/dev/null && ls .whl/deb/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .whl/deb/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
REGIMES=$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import build_library as b; print(b.REGIMES)")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$R/nvidia-smi.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" > "$R/versions.txt" 2>&1
git rev-parse HEAD > "$R/commit.txt" 2>/dev/null || true
for w in ${WORKLOADS:-softmax rmsnorm layernorm cross_entropy matmul attention}; do
  mkdir -p "$R/$w"
  if [ -n "${RESUME:-}" ] && [ -f "$RESUME/$w/distill.db" ]; then cp "$RESUME/$w/distill.db" "$R/$w/distill.db"; fi
  OUT=$R/$w timeout "${T:-520}" python3 benchmarks/distill_corpus.py --device cuda --workloads "$w" \
    --regimes "$REGIMES" --policy first > "$R/$w/walk.log" 2>&1 &
done
wait
# The stores are in WAL mode: each is checkpointed into its .db file before it is brought back.
for db in "$R"/*/distill.db; do
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('pragma wal_checkpoint(truncate)'); c.close()" "$db"
  rm -f "$db-wal" "$db-shm"
done
for w in "$R"/*/; do echo "== $w"; tail -4 "$w/walk.log"; done
