#!/usr/bin/env bash
# Issue 16's one-call run on the H200 (docs/benchmarks.md, "klineage at budget 10 on the six new
# held-out problems", second device call; carry .whl): the forward-only probes
# (forward_probes_h200.sh, T seconds), the shipped library with their lineages added
# (build_library.py --base), then budget-10 klineage runs with it (search_h200.sh) for what is
# left of L seconds. PROBLEMS and PER_GPU as in search_h200.sh.
# The device tool returns at most 8 files: everything is written under W (/tmp/issue16) and
# packed into $OUT/issue16.tgz at the end, bench.json and the logs beside it.
#   L=490 bash benchmarks/issue16_h200.sh
L=${L:-500}; S0=$SECONDS; OUT=${OUT:-$PWD/bench-out}; FINAL=$OUT; OUT=${W:-/tmp/issue16}; mkdir -p "$OUT" "$FINAL"
T=${T:-150} OUT=$OUT bash benchmarks/forward_probes_h200.sh > "$OUT/probes.log" 2>&1; tail -30 "$OUT/probes.log"
export PYTHONPATH=/tmp/site:$PWD/src
dbs=(); for w in colsum cumsum transpose; do [ -f "$OUT/probes/$w.db" ] && dbs+=(--db "$OUT/probes/$w.db"); done
python3 benchmarks/build_library.py --base src/klineage/data/skills-h200.json "${dbs[@]}" \
  --out "$OUT/probes/skills-h200.json" 2>&1 | tail -8
S=$OUT/probes/skills-h200.json; [ -f "$S" ] || S=
TS=$(( L - (SECONDS - S0) - 40 )); echo "search T=$TS"
SKILLS=$S BUDGET=10 POLICIES=klineage PER_GPU=${PER_GPU:-4} T=$TS EXTRA=--no-compile \
  PROBLEMS=${PROBLEMS:-batched_transpose_last2,column_max_bf16,column_mean_tall,matmul_long_k_small_mn} \
  OUT=$OUT bash benchmarks/search_h200.sh 2>&1 | tail -12
tar czf "$FINAL/issue16.tgz" -C "$OUT" . && cp "$OUT/search/bench.json" "$OUT/probes.log" "$FINAL/" 2>/dev/null
ls -la "$FINAL"
