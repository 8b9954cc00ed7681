"""MLP up-projection with GELU: y = gelu_tanh(x @ w + b), x (M, K), w (K, N), b (N,), fp16/bf16.

GELU is the tanh approximation, 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))), in both the
reference and the kernels. Compute-bound at the MLP shape: 2 * M * N * K FLOPs (4096 x 14336 x
4096 = 481 GFLOP, ~0.71 ms at the H200's measured 680 TFLOP/s) with the activation in the
epilogue; the decode regime (M = 64) is bound by reading w once (8192 x 14336 bf16 = 235 MB,
~55 us at 4.25 TB/s).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, w, b):
        return F.gelu(torch.matmul(x, w) + b, approximate="tanh")


M, N, K = 4096, 14336, 4096

REGIMES = {
    # CPU (interpreter), fp16. Ragged everywhere: no 64 divides M or N, no 32 divides K.
    "cpu_ragged_fp16": dict(M=45, N=90, K=72, dtype=torch.float16),
    # Multiples of the tiles: no partial tile.
    "cpu_aligned_fp16": dict(M=128, N=64, K=64, dtype=torch.float16),
    # K shorter than one K step (a single masked step) and N just past two tiles.
    "cpu_short_k_fp16": dict(M=20, N=130, K=16, dtype=torch.float16),
    # GPU (H200), bf16. Llama-style up-projection over a prefill batch: compute-bound.
    "mlp_up_4096": dict(M=4096, N=14336, K=4096, dtype=torch.bfloat16),
    # Decode batch of 64 tokens through the up-projection: memory-bound on w.
    "decode_m64": dict(M=64, N=14336, K=8192, dtype=torch.bfloat16),
}
CPU_REGIMES = ("cpu_ragged_fp16", "cpu_aligned_fp16", "cpu_short_k_fp16")
# The reference rounds x @ w to bf16, then again after + b, before the GELU; a kernel that keeps
# fp32 through the epilogue rounds once. On the H200 that differed by 2 bf16 ulps at |y| ~ 2 on
# 8 of 58M elements (0.031 > 0.01 + 0.01 * 2.02), so bf16 is checked at 2e-2, still inside
# the field's 5e-2 ceiling.
TOLERANCES = {"bfloat16": 2e-2}


def get_inputs(M=M, N=N, K=K, dtype=torch.bfloat16):
    # w scaled by 1/sqrt(K): pre-activations ~N(0, 2), the range where GELU is curved.
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
