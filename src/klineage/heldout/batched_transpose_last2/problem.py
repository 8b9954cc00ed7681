"""Batched transpose of the last two dims: y[b] = x[b].T, x (B, M, N) -> y (B, N, M) contiguous.

Keys laid out (heads, positions, head_dim) turned into (heads, head_dim, positions), or a
channels-last image batch made channels-first. No arithmetic, exact in every dtype: the cost
is memory, and the trick is moving whole lines on both sides, since x is contiguous along N
and y along M. The floor is reading x once and writing y once: 1024 x 512 x 96 bf16 = 101 MB
each way, ~47 us at the 4.25 TB/s an H200 copies at (docs/benchmarks.md, ceilings).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.transpose(1, 2).contiguous()


B, M, N = 1024, 512, 96

REGIMES = {
    # CPU (interpreter), fp32 and fp16: bf16 is not usable in the interpreter (wrong values
    # from a bf16 load and store). The naive kernel runs one program per row of x: B * M.
    "tiny": dict(B=2, M=5, N=7),
    # Three matrices, neither side a power of two: the masked row, the batch stride.
    "ragged": dict(B=3, M=9, N=33),
    "fp16": dict(B=2, M=12, N=20, dtype=torch.float16),
    # GPU (H200), bf16. Many small matrices (attention keys, 1024 heads): 524288 rows of 96.
    "heads": dict(B=1024, M=512, N=96, dtype=torch.bfloat16),
    # A few large ones, fp16: 12 matrices of 3000 x 2900, 209 MB each way.
    "few_large_fp16": dict(B=12, M=3000, N=2900, dtype=torch.float16),
}
CPU_REGIMES = ("tiny", "ragged", "fp16")


def get_inputs(B=B, M=M, N=N, dtype=torch.float32):
    return [torch.randn(B, M, N).to(dtype)]


def get_init_inputs():
    return []
