"""Row log-sum-exp: y[i] = log(sum_j exp(x[i, j])), a reduction of x (M, N) to y (M,).

The normaliser of a softmax or a log-likelihood, computed stably (shift by the row max). The
reference computes in fp32 and casts back to x's dtype. Memory-bound and read-only: the floor
is reading x once (the output is M values), e.g. 8192 x 16384 bf16 = 256 MiB, ~63 us on an H200.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.logsumexp(x.float(), dim=-1).to(x.dtype)


M, N = 8192, 16384

REGIMES = {
    # CPU (interpreter): a 45-wide row (block 64), a 3001-wide row (block 4096), fp16 rows of
    # 640.
    "tiny": dict(M=23, N=45),
    "odd": dict(M=5, N=3001),
    "fp16_small": dict(M=64, N=640, dtype=torch.float16),
    # GPU (H200), bf16: half a million rows of 128 (each program reads 256 bytes and writes
    # one value), and 8192 rows of 16384.
    "short_rows": dict(M=524288, N=128, dtype=torch.bfloat16),
    "long_rows": dict(M=8192, N=16384, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "odd", "fp16_small")


def get_inputs(M=M, N=N, dtype=torch.float32):
    # A per-row offset, so a kernel that drops the max shift would also be off by it.
    x = 3.0 * torch.randn(M, N) + 10.0 * torch.randn(M, 1)
    return [x.to(dtype)]


def get_init_inputs():
    return []
