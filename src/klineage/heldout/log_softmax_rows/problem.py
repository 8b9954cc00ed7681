"""Row log-softmax: y = x - max(x) - log(sum(exp(x - max(x)))), over the last dim of x (M, N).

The log-probabilities a loss or a sampler consumes. The reference computes in fp32 and casts
back. Memory-bound: read x once, write y once, e.g. 2048 x 16384 bf16 = 64 MiB each way,
~32 us at 4.25 TB/s on an H200.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.log_softmax(x.float(), dim=-1).to(x.dtype)


M, N = 2048, 16384

REGIMES = {
    # CPU (interpreter): a 77-wide row (block 128), a 2047-wide row (block 2048, one masked
    # lane), fp16 rows of 300.
    "tiny": dict(M=29, N=77),
    "odd": dict(M=6, N=2047),
    "fp16_small": dict(M=64, N=300, dtype=torch.float16),
    # GPU (H200), bf16: many 256-wide rows, and few 16384-wide rows.
    "short_rows": dict(M=131072, N=256, dtype=torch.bfloat16),
    "long_rows": dict(M=2048, N=16384, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "odd", "fp16_small")


def get_inputs(M=M, N=N, dtype=torch.float32):
    # Logits with a real spread, so exp(x - max) spans many orders of magnitude in a row.
    return [(2.5 * torch.randn(M, N)).to(dtype)]


def get_init_inputs():
    return []
