"""Bias-free linear layer y = x @ w.T in nn.Linear's layout: x (M, K), weight (N, K), y (M, N).

The weight is a parameter of the module (out_features x in_features, in the regime's dtype),
not an input, so the kernel reads B "transposed" (K contiguous in both operands). Compute-bound
at both GPU shapes: 2 * M * N * K FLOPs, 137 GFLOP for 4096^3 (~0.20 ms at the H200's measured
680 TFLOP/s) and 537 GFLOP for a 32000-wide vocabulary head (~0.79 ms). Note the roofline's
byte count covers inputs and outputs only, not the weight parameter.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, dtype):
        super().__init__()
        self.weight = nn.Parameter(
            (torch.randn(out_features, in_features) / math.sqrt(in_features)).to(dtype)
        )

    def forward(self, x):
        return F.linear(x, self.weight)


# K (in_features), N (out_features) and DTYPE size the parameter, so they are module globals
# that both get_init_inputs and get_inputs read; the regimes override them. M is the row count.
M = 4096
K = 4096
N = 4096
DTYPE = torch.bfloat16

REGIMES = {
    # CPU (interpreter), fp16. Ragged: no tile divides M, N or K.
    "cpu_ragged_fp16": dict(M=37, K=50, N=70, DTYPE=torch.float16),
    # Tile-aligned, several K steps.
    "cpu_aligned_fp16": dict(M=64, K=128, N=64, DTYPE=torch.float16),
    # More output columns than rows, N ragged past two tiles, K a single partial step.
    "cpu_wide_fp16": dict(M=9, K=24, N=150, DTYPE=torch.float16),
    # GPU (H200), bf16. Square projection (attention q/k/v/o-sized): compute-bound.
    "square_4096": dict(M=4096, K=4096, N=4096, DTYPE=torch.bfloat16),
    # LM head: a wide vocabulary projection, 500 column tiles of 64 per row of tiles.
    "lm_head_32000": dict(M=2048, K=4096, N=32000, DTYPE=torch.bfloat16),
}
CPU_REGIMES = ("cpu_ragged_fp16", "cpu_aligned_fp16", "cpu_wide_fp16")


def get_inputs(M=M):
    return [torch.randn(M, K, dtype=DTYPE)]


def get_init_inputs():
    return [K, N, DTYPE]


def flop_count(x):
    # N is the module global, i.e. the regime's out_features while its overrides apply.
    m, k = x.shape
    return 2.0 * m * N * k
