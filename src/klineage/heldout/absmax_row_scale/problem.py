"""Per-row absmax quantisation: s[i] = max_j |x[i, j]| / 127, q = clamp(round(x / s), -127, 127).

Dynamic per-token quantisation of activations before an int8 matmul. Returns (q, s): q holds
integers in x's dtype (exact in fp16/bf16), s is fp32 (M,). The reference works in fp32:
s = amax * (1/127) (a multiply, identical on CPU and GPU), q = torch.round(x / s), round half
to even, so the kernel must divide exactly (IEEE round-to-nearest) and round the same way.
Memory-bound: read x once, write q once (plus M scales), e.g. 4096 x 16384 bf16 = 128 MiB
each way, ~63 us at 4.25 TB/s on an H200.
"""

import torch
import torch.nn as nn

QMAX = 127.0
INV_QMAX = 1.0 / QMAX
# Floor on the row absmax, so an all-zero row gets a tiny scale rather than 0/0.
AMAX_FLOOR = 1e-8


class Model(nn.Module):
    def forward(self, x):
        xf = x.float()
        amax = xf.abs().amax(dim=-1, keepdim=True).clamp_min(AMAX_FLOOR)
        scale = amax * INV_QMAX
        q = torch.round(xf / scale).clamp(-QMAX, QMAX)
        return q.to(x.dtype), scale.squeeze(-1)


M, N = 4096, 16384

REGIMES = {
    # CPU (interpreter): a 33-wide row (block 64), a 1000-wide row (block 1024), and fp16 rows
    # of 4096. Inputs sit on a grid (get_inputs), so many x / s land on exact halves.
    "tiny": dict(M=37, N=33),
    "odd": dict(M=6, N=1000),
    "fp16_small": dict(M=16, N=4096, dtype=torch.float16),
    # GPU (H200), bf16: 262144 token rows of 128, and 4096 rows of 16384.
    "short_rows": dict(M=262144, N=128, dtype=torch.bfloat16),
    "long_rows": dict(M=4096, N=16384, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "odd", "fp16_small")


def get_inputs(M=M, N=N, dtype=torch.float32, ties=True):
    x = torch.randn(M, N)
    if ties:
        # Each row's absmax is pinned at 127/64 (its first element is -/+ that, so s is exactly
        # 1/64) and the rest lie on multiples of 1/128 within +-1.9, so x / s = 64 * x is an
        # exact half (the tie case of round-half-even) for about half of the elements.
        x = torch.round(x * 128.0) / 128.0
        x = x.clamp(-1.9, 1.9)
        x[:, 0] = torch.where(torch.rand(M) < 0.5, -127.0 / 64.0, 127.0 / 64.0)
    return [x.to(dtype)]


def get_init_inputs():
    return []
