"""Tall-skinny matrix product y = x @ w, x (M, K), w (K, N): a small output (M, N in 32..128)
reduced over a long K (64K..512K).

The shape of a weight gradient, dW = dY^T X with the tokens of a whole batch as K (64 x 64
features over 256K tokens), or of a GEMV batched over a few vectors. There are only M * N
outputs, 4096 at 64 x 64: tiled 64 x 64 as an ordinary matmul tiles them, that is one program
for the 132 SMs of an H200, so the reduction over K itself has to be split over programs and
the partial products added afterwards. x is scaled by 1/sqrt(K) so that every output is ~N(0, 1)
at any K, the magnitude the gate's tolerances are set for (unscaled, outputs would grow like
sqrt(K): ~512 at K = 256K).

Memory-bound: 2 * M * N * K FLOPs (flop_count) against reading x and w once, which at 64 x 64
over K = 256K in bf16 is 67 MB, ~16 us at the 4.25 TB/s an H200 copies at (docs/benchmarks.md,
ceilings). That is 32 FLOPs a byte, far under the ~165 at which the bf16 tensor cores would bind
(~700 TFLOP/s, the same ceilings).

fp16/bf16 products are accumulated in fp32; fp32 inputs are multiplied in IEEE fp32 (torch
uses no TF32 for fp32 matmuls by default, and TF32 misses the gate's 1e-4 tolerance).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w):
        return torch.matmul(x, w)


M, N, K = 64, 64, 262144

REGIMES = {
    # CPU (interpreter). The naive kernel is one interpreted program per output walking K 64 at
    # a time, so outputs stay in single digits and K in the hundreds. The expert counts one
    # pseudo-SM there (expert.py), so it aims at 4 programs: one tile split up to 4 ways.
    # K = 50 is under one 64-step: a single split, every K lane past 50 masked.
    "tiny": dict(M=2, N=3, K=50),
    # K = 300 = 4 * 64 + 44 is a multiple of no block: 3 splits of 2, 2 and 1 steps (128, 128,
    # 44 values of K), the last one ragged, summed by the second kernel.
    "ragged": dict(M=5, N=3, K=300),
    # fp16 in, fp32 partials, fp16 out: 4 splits of one 64-step each.
    "fp16": dict(M=4, N=4, K=256, dtype=torch.float16),
    # GPU (H200). The weight gradient: 64 x 64 over 256K tokens, 67 MB of bf16, one 64 x 64
    # tile split 512 ways (K chunks of 512).
    "wgrad_bf16": dict(M=64, N=64, K=262144, dtype=torch.bfloat16),
    # Tall output: 128 x 32 over 128K, 42 MB of fp16; two 64 x 32 tiles, each split 256 ways,
    # and w (8 MB) read once per tile.
    "tall_k_fp16": dict(M=128, N=32, K=131072, dtype=torch.float16),
    # fp32 (IEEE products, on the FMA units: 8 FLOPs a byte, still under their ~16 per byte of
    # bandwidth): 32 x 32 over 256K, 67 MB; one 32 x 32 tile split 512 ways.
    "fp32": dict(M=32, N=32, K=262144, dtype=torch.float32),
}
CPU_REGIMES = ("tiny", "ragged", "fp16")


def get_inputs(M=M, N=N, K=K, dtype=torch.float32):
    # x is scaled in fp32 before the cast, so fp16/bf16 inputs round once.
    scale = K**-0.5
    return [(torch.randn(M, K) * scale).to(dtype), torch.randn(K, N).to(dtype)]


def get_init_inputs():
    return []


def flop_count(x, w):
    # One multiply and one add per (row of x, column of w, step of K).
    return 2.0 * x.shape[0] * x.shape[1] * w.shape[1]
