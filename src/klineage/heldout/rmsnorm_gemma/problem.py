"""Gemma-style RMSNorm: y = x * rsqrt(mean(x^2, -1) + eps) * (1 + weight), over rows of x (M, N).

Gemma stores the scale as an offset from one, so the kernel must add 1 to the weight (the
weight here is random, not zero, so dropping either the weight or the 1 fails). The reference
computes in fp32 and casts back. Memory-bound: read x once, write y once (plus N weights),
e.g. 2048 x 16384 bf16 = 64 MiB each way, ~32 us at 4.25 TB/s on an H200.
"""

import torch
import torch.nn as nn

EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden_size, eps=EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(0.5 * torch.randn(hidden_size))

    def forward(self, x):
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * (1.0 + self.weight.float())).to(x.dtype)


# The hidden size N sizes the weight, so it is a module global the regimes override
# (get_init_inputs and get_inputs both read it).
M = 2048
N = 16384

REGIMES = {
    # CPU (interpreter): odd short rows, a 2000-wide row (block 2048), Gemma-2B's 2304 in fp16.
    "tiny": dict(M=19, N=45),
    "odd": dict(M=5, N=2000),
    "fp16_gemma2b": dict(M=24, N=2304, dtype=torch.float16),
    # GPU (H200), bf16: 262144 rows of 256 (one small program per row), and few long rows of
    # 16384 (one block of 16K elements a program).
    "short_rows": dict(M=262144, N=256, dtype=torch.bfloat16),
    "long_rows": dict(M=2048, N=16384, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "odd", "fp16_gemma2b")


def get_inputs(M=M, dtype=torch.float32):
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return [N]
