#!/usr/bin/env bash
# Issue 14's benchmarks on the H200 (benchmarks/measurement_h200.py), one device call per group:
#   bash benchmarks/measurement_h200.sh trust,sweep,distill     # carry .whl
#   bash benchmarks/measurement_h200.sh load                    # carry .whl and bench-out/today
# bench-out/today is the gate before this issue: git archive 4c5c05e src | tar -x -C bench-out/today
set -uo pipefail
OUT=${OUT:-$PWD/bench-out}; mkdir -p "$OUT"; LOG="$OUT/log.txt"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export SITE=/tmp/site PYTHONPATH=/tmp/site:$PWD/src
if ! command -v bwrap >/dev/null && ls .whl/deb/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .whl/deb/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader >> "$LOG"
# Gate calls keep their regimes' cases on disk: put them on the filesystem with the most room.
df -h /tmp /root /var/tmp 2>/dev/null >> "$LOG"
BIG=$(python3 -c "import shutil; print(max(['/tmp','/root','/var/tmp'], key=lambda p: shutil.disk_usage(p).free))")
[ "$BIG" != /tmp ] && mkdir -p "$BIG/kltmp" && export TMPDIR="$BIG/kltmp"; echo "TMPDIR=${TMPDIR:-/tmp}" >> "$LOG"
for phase in ${1//,/ }; do
  case $phase in
    trust) timeout 240 python3 -m pytest -q -p no:cacheprovider -n 3 tests/gpu/test_gate_trust_gpu.py >> "$LOG" 2>&1 ;;
    sweep) timeout 300 python3 benchmarks/measurement_h200.py sweep >> "$LOG" 2>&1 ;;
    distill) timeout 300 python3 benchmarks/measurement_h200.py distill --regimes n16,n64,n256,n1024,n4096,n16384 >> "$LOG" 2>&1 ;;
    load) timeout 300 python3 benchmarks/measurement_h200.py load --workers 12 --foreground 5 --tag new >> "$LOG" 2>&1 ;;
    load-today) [ -d bench-out/today/src ] && timeout 280 python3 benchmarks/measurement_h200.py load --src "$PWD/bench-out/today/src" --workers 12 --foreground 5 --tag today >> "$LOG" 2>&1 ;;
  esac
  echo "== $phase rc=$?" >> "$LOG"
done
tail -c 9000 "$LOG"
