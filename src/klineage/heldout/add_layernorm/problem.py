"""Residual add then LayerNorm: y = layer_norm(x + residual) * weight + bias, over rows (M, N).

The post-norm (BERT-style) "add & norm", biased variance as torch.nn.functional.layer_norm;
only y is returned. The reference adds and normalises in fp32 and casts back; weight and bias
are random fp32 parameters. Memory-bound: read x and residual once, write y once, e.g.
4096 x 8192 bf16 = 3 x 64 MiB, ~47 us at 4.25 TB/s on an H200.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-5


class Model(nn.Module):
    def __init__(self, hidden_size, eps=EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))
        self.bias = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x, residual):
        h = x.float() + residual.float()
        y = F.layer_norm(h, (h.shape[-1],), self.weight.float(), self.bias.float(), self.eps)
        return y.to(x.dtype)


# N (the hidden size) sizes weight and bias, so it is a module global the regimes override.
M = 4096
N = 8192

REGIMES = {
    # CPU (interpreter): odd short rows, a 1500-wide row (block 2048), fp16 over 48 rows.
    # The inputs carry a per-row offset (see get_inputs) so the mean is not ~0.
    "tiny": dict(M=33, N=50),
    "odd": dict(M=6, N=1500),
    "fp16_small": dict(M=48, N=1024, dtype=torch.float16),
    # GPU (H200), bf16: BERT-sized short rows in bulk, and long 8192-wide rows.
    "short_rows": dict(M=262144, N=128, dtype=torch.bfloat16),
    "long_rows": dict(M=4096, N=8192, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "odd", "fp16_small")


def get_inputs(M=M, dtype=torch.float32):
    # A random offset per row, so a kernel that forgets to subtract the mean fails.
    x = torch.randn(M, N) + 2.0 * torch.randn(M, 1)
    residual = torch.randn(M, N)
    return [x.to(dtype), residual.to(dtype)]


def get_init_inputs():
    return [N]
