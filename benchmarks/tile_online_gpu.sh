#!/usr/bin/env bash
# tile_online beside the kernel it is made from, on the column softmax (docs/DEVICE.md; carry .whl):
#   STORE=benchmarks/results/issue16-2026-12-07/call2-h100/search.db bash benchmarks/tile_online_gpu.sh
# STORE: a search.db whose column_softmax run's best kept kernel is the second pair's base.
set -u
OUT=${OUT:-$PWD/bench-out}; R=$OUT/tile_online; mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src KLINEAGE_DB=/tmp/tile-online.db KLINEAGE_CACHE_DIR=/tmp/tile-online-cache
if ! command -v bwrap >/dev/null && ls .whl/deb/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .whl/deb/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$R/nvidia-smi.txt" 2>&1
# This card's ceilings, recorded always; OWN_FLOOR=1 makes the gate's % of floor this card's own
# (by default it is the H200's on every card: docs/benchmarks.md "The floor on an H100").
python3 benchmarks/card_ceilings.py > "$R/ceilings.json" 2> "$R/ceilings.err" || true
if [ -n "${OWN_FLOOR:-}" ] && [ -s "$R/ceilings.json" ]; then eval "$(python3 benchmarks/card_ceilings.py --exports "$R/ceilings.json")"; fi
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" > "$R/versions.txt" 2>&1
python3 benchmarks/tile_online_side_by_side.py ${STORE:+--store "$STORE"} --out "$R" 2>&1 | tee "$R/log.txt" | tail -60
