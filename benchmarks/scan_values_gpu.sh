#!/usr/bin/env bash
# Issue 16: the reverse cumsum's structural values side by side on one GPU (docs/DEVICE.md;
# carry .whl). Each variant is made here from the naive kernel by klineage's passes
# (benchmarks/structural_rewrites.py) and gated beside the naive (--base: one gate call, CUDA-graph
# replay) on the regimes its family is for:
# - short rows (524288 x 160 fp16): multi_row's rows a program, at its 64-column chunk and with
#   the chunk pinned to 256 (the whole row one step: a one-config tunables table) at 4 to 32 rows
#   (the kept table of 2026-12-07 could widen the chunk but not the rows: 30% of floor there);
# - long and mid rows (384 x 200000 bf16, 6144 x 12000 fp32): split_scan at its step (4096, the
#   expert's tile), at the naive's 64 (chunk=0: its behaviour before 2026-12-07), at 1024, and
#   at two and four times its segments a row.
#   bash benchmarks/scan_values_gpu.sh          # $OUT/scan.tgz: scan/{short,long,kept}/*.json
# A chain ending in a step named in BESIDE (default ascending_scan), whose prefix is in the same
# list, is gated beside that prefix instead of the naive kernel: the step side by side, e.g.
#   SHORT=multi_row@rows=4,multi_row@rows=4+ascending_scan LONG=split_scan,split_scan+ascending_scan
# T (480 s) caps each gate call; all run at once (the gate's GPU lock serialises the timing).
# KEPT=DIR also gates each DIR/<problem>__<name>.py beside that held-out problem's naive kernel
# on all its regimes ($OUT/scan/kept/): kernels a search kept elsewhere, timed on this card
# (<problem>__<name>_then_<step>.py beside <problem>__<name>.py, for a step in BESIDE).
set -uo pipefail
OUT=${OUT:-$PWD/bench-out}; R=$OUT/scan; mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
if ! command -v bwrap >/dev/null && ls .whl/deb/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .whl/deb/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$R/nvidia-smi.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" > "$R/versions.txt" 2>&1
[ -f COMMIT ] && echo "klineage $(cat COMMIT) (benchmarks/freeze.sh)" >> "$R/versions.txt"
python3 benchmarks/card_ceilings.py > "$R/ceilings.json" 2> "$R/ceilings.err" || true
SHORT=${SHORT:-multi_row@rows=4,multi_row@rows=4+tunables@CHUNK=256@num_warps=4,multi_row@rows=8+tunables@CHUNK=256@num_warps=4,multi_row@rows=16+tunables@CHUNK=256@num_warps=4,multi_row@rows=32+tunables@CHUNK=256@num_warps=8}
LONG=${LONG:-split_scan,split_scan@chunk=0,split_scan@programs_per_sm=16@max_segments=128}
export PROBLEMS=reverse_cumsum_rows
# SHORT=- or LONG=- leaves that family out (KEPT alone, say)
[ "$SHORT" != - ] && python3 benchmarks/structural_rewrites.py "$R/short" "$SHORT" > "$R/made.txt" 2>&1
[ "$LONG" != - ] && python3 benchmarks/structural_rewrites.py "$R/long" "$LONG" >> "$R/made.txt" 2>&1
gate() {  # file, regimes...: beside the naive kernel of the problem the file's name starts with
  local f=$1; shift
  local H=src/klineage/heldout/$(basename "${f%%__*}") base
  base=$H/naive.py
  for step in ${BESIDE:-ascending_scan}; do
    case "$f" in *_then_"$step".py) [ -e "${f%_then_"$step".py}.py" ] && base=${f%_then_"$step".py}.py ;; esac
  done
  timeout -k 10 "${T:-480}" python3 -m klineage gate "$H/problem.py" "$f" --device cuda --base "$base" \
    "$@" --json > "${f%.py}.json" 2> "${f%.py}.err" &
}
for f in "$R"/short/*.py; do [ -e "$f" ] && gate "$f" -r short_rows_fp16; done
for f in "$R"/long/*.py; do [ -e "$f" ] && gate "$f" -r long_rows_bf16 -r mid_fp32; done
# KEPT_GLOB (default *__*.py) picks which of KEPT's files are gated; the others are there as
# bases (KEPT_GLOB='*_then_*.py': only each step beside the kernel it was made from)
if [ -n "${KEPT:-}" ]; then mkdir -p "$R/kept" && cp "$KEPT"/*__*.py "$R/kept/" && for f in "$R"/kept/${KEPT_GLOB:-*__*.py}; do gate "$f"; done; fi
wait
python3 benchmarks/verdicts.py "$R"/short "$R"/long "$R"/kept | tee "$R/summary.txt"
# The device tool brings back at most 8 files from $OUT: everything goes back as one archive
# beside the summary (tar xzf scan.tgz here).
cp "$R/summary.txt" "$OUT/scan-summary.txt" && tar czf "$OUT/scan.tgz" -C "$OUT" scan && rm -rf "$R"
