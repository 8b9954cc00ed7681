"""Tall-skinny fp32 matrix multiply C = A @ B, A (M, 64) with M in the hundreds of thousands,
B (64, N), in full IEEE fp32 (no TF32: the tolerance is 1e-4).

The inner dimension is only 64, so each output element takes 128 FLOPs while its tile's A rows
are read once: with N = 64 the problem is bound by memory (A and C, 537 MB, ~126 us at 4.25
TB/s on the H200). With N = 512 the bytes drop to 302 MB but IEEE fp32 runs on the CUDA cores
(~67 TFLOP/s FMA, not the tensor cores), so its 8.6 GFLOP take ~130 us and compute binds.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


M, N, K = 1048576, 64, 64

REGIMES = {
    # CPU (interpreter), all fp32 with K = 64. Ragged M and N (no 64 divides them).
    "cpu_ragged": dict(M=200, N=33),
    # Tile-aligned: no partial tile anywhere.
    "cpu_aligned": dict(M=256, N=64),
    # N past two column tiles, M ragged.
    "cpu_wide": dict(M=70, N=130),
    # GPU (H200), fp32. N = 64: one column of tiles, a streaming read of A and write of C.
    "narrow_n64": dict(M=1048576, N=64),
    # N = 512: eight column tiles re-read A's row panel; IEEE fp32 FLOPs bind.
    "wide_n512": dict(M=131072, N=512),
}
CPU_REGIMES = ("cpu_ragged", "cpu_aligned", "cpu_wide")


def get_inputs(M=M, N=N, K=K):
    return [torch.randn(M, K, dtype=torch.float32), torch.randn(K, N, dtype=torch.float32)]


def get_init_inputs():
    return []


def flop_count(A, B):
    m, k = A.shape
    n = B.shape[1]
    return 2.0 * m * n * k
