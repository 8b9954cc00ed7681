"""Linear layer with a fused ReLU: y = relu(x @ w + b), x (M, K), w (K, N), b (N,), fp16/bf16.

Compute-bound at the square shape: 2 * M * N * K FLOPs (4096^3 = 137 GFLOP, ~0.20 ms at the
H200's measured 680 TFLOP/s); the bias and the ReLU belong in the epilogue and cost nothing.
The skinny regime (M = 32) is instead bound by reading w once (8192 x 16384 bf16 = 268 MB,
~63 us at 4.25 TB/s), where a 64-row tile is half empty and the grid, not the tile, decides.

Kernels must accumulate in fp32; the reference is the plain PyTorch expression in the input
dtype (cuBLAS on the GPU), so eager is a real baseline.
"""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w, b):
        return torch.relu(torch.matmul(x, w) + b)


M, N, K = 4096, 4096, 4096

REGIMES = {
    # CPU (interpreter), fp16. Nothing divides a 64x64x32 tile: ragged M, N and a K tail.
    "cpu_ragged_fp16": dict(M=50, N=70, K=40, dtype=torch.float16),
    # Every dimension a multiple of the usual tiles (no partial tile anywhere).
    "cpu_aligned_fp16": dict(M=64, N=128, K=96, dtype=torch.float16),
    # Tall and narrow: N below one tile, K spanning several K steps.
    "cpu_tall_fp16": dict(M=129, N=24, K=128, dtype=torch.float16),
    # GPU (H200), bf16. Square: compute-bound, many output tiles.
    "square_4096": dict(M=4096, N=4096, K=4096, dtype=torch.bfloat16),
    # Skinny (a small decode batch through a wide layer): memory-bound on w, one row of tiles.
    "skinny_m32": dict(M=32, N=16384, K=8192, dtype=torch.bfloat16),
}
CPU_REGIMES = ("cpu_ragged_fp16", "cpu_aligned_fp16", "cpu_tall_fp16")


def get_inputs(M=M, N=N, K=K, dtype=torch.bfloat16):
    # w scaled by 1/sqrt(K) so x @ w is ~N(0, 1): about half the outputs are clipped by the ReLU.
    x = torch.randn(M, K, dtype=dtype)
    w = (torch.randn(K, N) / math.sqrt(K)).to(dtype)
    b = torch.randn(N, dtype=dtype)
    return [x, w, b]


def get_init_inputs():
    return []


def flop_count(x, w, b):
    m, k = x.shape
    n = w.shape[1]
    return 2.0 * m * n * k
