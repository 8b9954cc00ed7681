#!/usr/bin/env bash
# The trust-boundary gate on the H200: its isolation level there, the GPU-only checks (graph
# replay, device kernel list), the cost of a gate call before and after, and the GPU tier.
#
#   device run, carrying .whl (wheels + the bubblewrap .deb, docs/DEVICE.md) and bench-out/old
#   (the gate before: git archive 8950f72 src | tar -x -C bench-out/old)
set -uo pipefail
OUT=${OUT:-/tmp/out}
LOG="$OUT/log.txt"
say() { echo "$@" | tee -a "$LOG"; }
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
# The GPU machine has no bubblewrap and no network: unpack the carried Debian package.
if ! command -v bwrap >/dev/null && ls .whl/deb/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .whl/deb/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
say "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
say "$(python3 -c "from klineage.gate.sandbox import available_levels; print('isolation levels:', [str(l) for l in available_levels()])")"
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 3 tests/gpu/test_gate_trust_gpu.py 2>&1 | tail -20 | tee -a "$LOG"
for which in before after; do
  src=$PWD/src; [ $which = before ] && src=$PWD/bench-out/old/src
  [ -d "$src" ] || continue
  PYTHONPATH=/tmp/site:$src timeout 150 python3 benchmarks/gate_overhead.py --device cuda --repeat 2 --steady > "$OUT/cost_$which.json" 2>"$OUT/cost_$which.err"
  say "$which: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['cold_s_all'], d['stage_seconds_last_cold'])" "$OUT/cost_$which.json" 2>&1 | tail -1)"
done
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 6 tests/gpu/test_gate_gpu.py 2>&1 | tail -12 | tee -a "$LOG"
