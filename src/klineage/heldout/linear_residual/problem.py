"""Output projection with a residual add: y = x @ w.T + bias + residual.

x (M, K), w (N, K) in nn.Linear's layout, bias (N,), residual (M, N); all are inputs, in one
dtype. At K = 4096 it is compute-bound (2 * M * N * K = 550 GFLOP for 16384 x 4096 x 4096,
~0.81 ms at the H200's measured 680 TFLOP/s); at K = 256 the residual read and the output write
dominate (277 MB, ~65 us at 4.25 TB/s, against ~50 us of FLOPs), so fusing the add into the
epilogue is the whole point.

fp16/bf16 kernels accumulate in fp32; fp32 inputs need full IEEE fp32 products (no TF32) to
meet the 1e-4 tolerance.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, w, bias, residual):
        return F.linear(x, w, bias) + residual


M, N, K = 16384, 4096, 4096

REGIMES = {
    # CPU (interpreter). Ragged fp16: no tile divides M, N or K (33 = 32 + 1: a one-wide K tail).
    "cpu_ragged_fp16": dict(M=45, N=70, K=33, dtype=torch.float16),
    # Tile-aligned fp16 with four K steps.
    "cpu_aligned_fp16": dict(M=64, N=64, K=128, dtype=torch.float16),
    # fp32: the exact-product path, ragged M and N.
    "cpu_fp32": dict(M=30, N=50, K=64, dtype=torch.float32),
    # GPU (H200), bf16. Attention output projection over 16k tokens: compute-bound.
    "proj_k4096": dict(M=16384, N=4096, K=4096, dtype=torch.bfloat16),
    # Small K: the residual and the output traffic dominate, memory-bound.
    "residual_heavy_k256": dict(M=16384, N=4096, K=256, dtype=torch.bfloat16),
}
CPU_REGIMES = ("cpu_ragged_fp16", "cpu_aligned_fp16", "cpu_fp32")
# The reference rounds x @ w.T + bias to bf16 before adding the residual; a kernel that adds in
# fp32 rounds once. Where |x @ w.T + bias| ~ 3 and the residual cancels it, that differs by one
# ulp of the larger value (0.0156 at |y| ~ 0.27: 5 of 67M elements on the H200), so bf16 is
# checked at 2e-2, still inside the field's 5e-2 ceiling.
TOLERANCES = {"bfloat16": 2e-2}


def get_inputs(M=M, N=N, K=K, dtype=torch.bfloat16):
    x = torch.randn(M, K, dtype=dtype)
    w = (torch.randn(N, K) / K**0.5).to(dtype)
    bias = torch.randn(N, dtype=dtype)
    residual = torch.randn(M, N, dtype=dtype)
    return [x, w, bias, residual]


def get_init_inputs():
    return []


def flop_count(x, w, bias, residual):
    m, k = x.shape
    n = w.shape[0]
    return 2.0 * m * n * k
