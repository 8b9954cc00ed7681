#!/usr/bin/env bash
# Issue 16: does a suffix scan that loads its chunk in ascending addresses (and scans it with
# tl.cumsum(..., reverse=True)) beat the same kernel loading it back to front? Each
# DIR/<name>_asc.py is gated beside DIR/<name>.py (--base: one gate call, CUDA-graph replay)
# on the reverse cumsum's regimes its kernel is for. The _asc files are what the
# ascending_scan pass writes from each (klineage.optimize.materialize.mechanical). Carry .frozen (benchmarks/freeze.sh);
# DIR is benchmarks/results/issue16-2026-12-07e/ascending by default (copy it into .frozen).
#   cd .frozen && DIR=ascending bash benchmarks/ascending_scan_gpu.sh   # $OUT/asc-*.json
set -uo pipefail
OUT=${OUT:-$PWD/bench-out}; mkdir -p "$OUT"
DIR=${DIR:-benchmarks/results/issue16-2026-12-07e/ascending}
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
if ! command -v bwrap >/dev/null && ls .whl/deb/bubblewrap_*.deb >/dev/null 2>&1; then
  dpkg -x .whl/deb/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  [ -f COMMIT ] && echo "klineage $(cat COMMIT)"; } > "$OUT/asc-env.txt" 2>&1
H=src/klineage/heldout/reverse_cumsum_rows
for asc in "$DIR"/*_asc.py; do
  base=${asc%_asc.py}.py; name=$(basename "${asc%_asc.py}")
  case "$name" in *multi_row*) regimes="-r short_rows_fp16 -r mid_fp32" ;; *) regimes="-r long_rows_bf16 -r mid_fp32" ;; esac
  timeout -k 10 "${T:-300}" python3 -m klineage gate "$H/problem.py" "$asc" --device cuda --base "$base" \
    $regimes --json > "$OUT/asc-$name.json" 2> "$OUT/asc-$name.err" &
done
wait
python3 - "$OUT" <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("asc-*.json")):
    try:
        g = json.loads(f.read_text())
    except ValueError:
        print(f.name, "no result"); continue
    prof = next((s for s in g["stages"] if s["stage"] == "profile"), None)
    why = next((s["message"] for s in g["stages"] if s["status"] == "failed"), "")
    print(f.name, "accepted" if g["accepted"] else "REFUSED: " + why[:300])
    for reg, v in ((prof or {}).get("numbers") or {}).get("regimes", {}).items():
        print(f"   {reg}: {v['kernel_ms']*1000:.1f} us, {v.get('ratio', 0):.3f}x the back-to-front kernel "
              f"[{v.get('ratio_lo', 0):.3f}-{v.get('ratio_hi', 0):.3f}], {v.get('pct_of_floor') or 0:.1f}% of floor")
PY
