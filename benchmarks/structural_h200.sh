#!/usr/bin/env bash
# Issue 16: the structural forward passes' rewrites of held-out naive kernels, gated on the H200
# beside their naive start (side by side: --base), all at once, each capped at T seconds.
#   bash benchmarks/structural_h200.sh DIR     # DIR/<problem>__<pass>.py, made by
#   python benchmarks/structural_rewrites.py DIR (on any machine; the rewrites are text)
# Each verdict goes to $OUT/structural/<problem>__<pass>.json (speedup over the naive start per
# regime, device and host time, % of the roofline floor, eager and torch.compile times).
set -uo pipefail
DIR=${1:?usage: structural_h200.sh DIR} T=${T:-420}
OUT=${OUT:-$PWD/bench-out}; mkdir -p "$OUT/structural"
for f in "$DIR"/*__*.py; do
  name=$(basename "$f" .py); problem=${name%%__*}
  H=src/klineage/heldout/$problem
  timeout -k 10 "$T" python3 -m klineage gate "$H/problem.py" "$f" --device cuda --base "$H/naive.py" \
    --json > "$OUT/structural/$name.json" 2> "$OUT/structural/$name.err" &
done
wait
python3 - "$OUT/structural" <<'PY' || true
import json, sys
from pathlib import Path
for f in sorted(Path(sys.argv[1]).glob("*.json")):
    try:
        d = json.loads(f.read_text())
    except ValueError:
        print(f"{f.stem}: no verdict ({(f.with_suffix('.err')).read_text()[-300:]!r})"); continue
    print(f"{f.stem}: accepted={d['accepted']} {d['message'][:200]}")
    prof = next((s for s in d["stages"] if s["stage"] == "profile"), None)
    for name, row in ((prof or {}).get("numbers", {}).get("regimes") or {}).items():
        print(f"   {name}: {row.get('kernel_ms')} ms, x{row.get('ratio')} vs naive (spread {row.get('spread')}),"
              f" {row.get('pct_of_floor')}% of floor, compile {row.get('compile_ms')} ms, launch-bound {row.get('launch_bound')}")
PY
