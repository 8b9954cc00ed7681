#!/usr/bin/env bash
# The tuning sweeps behind the constants in the corpus kernels (run on the H200 through the
# device tool, 2026-11-30; results in docs/benchmarks.md). Run from benchmarks/: bash sweeps_2026-11-30.sh [1|2|3|all]
set -u
S="python3 sweep.py"
round="${1:-all}"
if [ "$round" = 1 ] || [ "$round" = all ]; then
for w in rmsnorm layernorm; do
  $S --workload $w --param TILE_ELEMENTS=1024,2048,4096,8192 --param ELEMENTS_PER_THREAD=8,16,32 \
     --regimes "$( [ $w = rmsnorm ] && echo llama || echo hidden_4096 ),short_rows"
  $S --workload $w --param LOOP_BLOCK_N=4096,8192,16384 --param ELEMENTS_PER_THREAD=16,32 --regimes long_rows
done
$S --workload softmax --param ROW_BLOCK_ELEMS=2048,4096,8192 --param PERSISTENT_WARPS_PER_SM=32,64 --regimes tiny_rows_gpu,large
$S --workload softmax --param ONLINE_BLOCK=4096,8192,16384 --param MAX_FUSED_SIZE=16384,131072 --regimes long_rows
fi
if [ "$round" = 2 ] || [ "$round" = all ]; then
# Second round (after moving the row load ahead of the parameter loads, and making the softmax
# warps and the norms' x cache policy launcher constants).
for w in rmsnorm layernorm; do
  $S --workload $w --param "X_EVICTION_POLICY='evict_first',''" --param TILE_ELEMENTS=2048,8192 --param ELEMENTS_PER_THREAD=16,32 \
     --regimes "$( [ $w = rmsnorm ] && echo llama || echo hidden_4096 ),short_rows"
done
$S --workload softmax --param ELEMENTS_PER_THREAD=8,16,32,64 --regimes large,fp32_4096,tiny_rows_gpu
$S --workload softmax --param ONLINE_BLOCK=8192,16384 --param ELEMENTS_PER_THREAD=16,32 --regimes long_rows
fi
if [ "$round" = 3 ] || [ "$round" = all ]; then
# Third round: the parameters' cache policy, and bigger layernorm tiles.
$S --workload layernorm --param "PARAM_EVICTION_POLICY='evict_last',''" --param TILE_ELEMENTS=8192,16384 --param ELEMENTS_PER_THREAD=32,64 --regimes hidden_4096,short_rows
$S --workload rmsnorm --param "PARAM_EVICTION_POLICY='evict_last',''" --regimes llama,short_rows
fi
