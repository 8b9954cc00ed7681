"""Batched matrix multiply C[b] = A[b] @ B[b], A (Bt, M, K), B (Bt, K, N), in the input dtype.

The few-large regime is compute-bound: 2 * Bt * M * N * K FLOPs (8 x 2048^3 = 137 GFLOP, ~0.20
ms at the H200's measured 680 TFLOP/s). The many-small regime (1024 products of 256^3) does a
quarter of that work but moves 403 MB (~95 us at 4.25 TB/s), so it is bound by memory and by
how well ~16 tiles per product fill the machine.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.bmm(A, B)


Bt, M, N, K = 8, 2048, 2048, 2048

REGIMES = {
    # CPU (interpreter), fp16. Ragged tiles in every dimension over three products.
    "cpu_ragged_fp16": dict(Bt=3, M=33, N=40, K=48, dtype=torch.float16),
    # Tile-aligned, two products: no partial tile, two K steps.
    "cpu_aligned_fp16": dict(Bt=2, M=64, N=64, K=64, dtype=torch.float16),
    # One product, N under one tile, K with a ragged tail (100 = 3 * 32 + 4).
    "cpu_single_fp16": dict(Bt=1, M=70, N=17, K=100, dtype=torch.float16),
    # GPU (H200), bf16. A few large products: compute-bound.
    "few_large": dict(Bt=8, M=2048, N=2048, K=2048, dtype=torch.bfloat16),
    # Many small products (attention-sized): memory-bound, 16 output tiles each.
    "many_small": dict(Bt=1024, M=256, N=256, K=256, dtype=torch.bfloat16),
}
CPU_REGIMES = ("cpu_ragged_fp16", "cpu_aligned_fp16", "cpu_single_fp16")


def get_inputs(Bt=Bt, M=M, N=N, K=K, dtype=torch.bfloat16):
    return [torch.randn(Bt, M, K, dtype=dtype), torch.randn(Bt, K, N, dtype=dtype)]


def get_init_inputs():
    return []


def flop_count(A, B):
    bt, m, k = A.shape
    n = B.shape[2]
    return 2.0 * bt * m * n * k
