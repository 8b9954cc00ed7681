"""Residual add then RMSNorm: h = x + residual, y = h * rsqrt(mean(h^2, -1) + eps) * weight.

The pre-norm transformer block's fused "add & norm"; only y is returned. The reference adds and
normalises in fp32 and rounds once to x's dtype; the weight is a random fp32 parameter.
Memory-bound: the floor is reading x and residual once and writing y once (plus N weights),
e.g. 4096 x 8192 bf16 = 3 x 64 MiB, ~47 us at 4.25 TB/s on an H200.
"""

import torch
import torch.nn as nn

EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden_size, eps=EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x, residual):
        h = x.float() + residual.float()
        inv_rms = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * inv_rms * self.weight.float()).to(x.dtype)


# N (the hidden size) is a constructor argument, so regimes override this module global, read
# by get_init_inputs (the weight) and get_inputs (the row length) alike.
M = 4096
N = 8192

REGIMES = {
    # CPU (interpreter): short odd rows, 1500-wide rows (a block of 2048, a quarter of it
    # masked off), and fp16 inputs over 67 programs.
    "tiny": dict(M=37, N=33),
    "odd": dict(M=6, N=1500),
    "fp16_small": dict(M=67, N=768, dtype=torch.float16),
    # GPU (H200), bf16: many 128-wide rows (one tiny program each), and long 8192-wide rows.
    "short_rows": dict(M=262144, N=128, dtype=torch.bfloat16),
    "long_rows": dict(M=4096, N=8192, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "odd", "fp16_small")


def get_inputs(M=M, dtype=torch.float32):
    return [torch.randn(M, N, dtype=dtype), torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return [N]
