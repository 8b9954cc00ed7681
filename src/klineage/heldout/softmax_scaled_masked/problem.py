"""Scaled, masked softmax: y = softmax(x * scale + bias) over the last dim of x (M, N).

The attention-probability step with a key bias shared by all rows: bias (N,) is an ALiBi-like
ramp with about a quarter of the columns at -inf (padded or masked keys; the last column is
always kept, so no row is all -inf). scale is a constructor argument. The reference computes in
fp32 and casts back; masked columns come out exactly 0. Memory-bound: read x once, write y
once (plus N bias values), e.g. 4096 x 8192 bf16 = 64 MiB each way, ~32 us on an H200.
"""

import torch
import torch.nn as nn

# 1/sqrt(head_dim) for head_dim 64. A module global so a regime can override it.
SCALE = 0.125


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, bias):
        z = x.float() * self.scale + bias.float()
        return torch.softmax(z, dim=-1).to(x.dtype)


M, N = 4096, 8192

REGIMES = {
    # CPU (interpreter): a 33-wide row (block 64), a 1000-wide row with another scale, and
    # fp16 rows of 257 (block 512, most of the block masked off).
    "tiny": dict(M=37, N=33),
    "odd": dict(M=6, N=1000, SCALE=0.3),
    "fp16_small": dict(M=64, N=257, dtype=torch.float16),
    # GPU (H200), bf16: 262144 rows of 128 keys, and 4096 rows of 8192 keys.
    "short_rows": dict(M=262144, N=128, dtype=torch.bfloat16),
    "long_rows": dict(M=4096, N=8192, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "odd", "fp16_small")


def get_inputs(M=M, N=N, dtype=torch.float32, masked_frac=0.25):
    x = (4.0 * torch.randn(M, N)).to(dtype)
    # An ALiBi-like linear penalty by distance from the last key, then random masked keys.
    ramp = -0.5 * torch.arange(N - 1, -1, -1, dtype=torch.float32) / N
    masked = torch.rand(N) < masked_frac
    masked[-1] = False
    bias = ramp.masked_fill(masked, float("-inf"))
    return [x, bias]


def get_init_inputs():
    return [SCALE]
