"""2-D transpose: y = x.T, materialised contiguous, for x (M, N) -> y (N, M).

No arithmetic: the whole cost is memory, and the trick is moving it in whole lines on both
sides. x's rows are contiguous along N and y's along M, so a kernel that reads x along its
rows writes y across its rows (one element per line) unless it exchanges the data through a
tile. Exact in every dtype. The floor is reading x once and writing y once,
2 * M * N * itemsize bytes (8192 x 8192 bf16 = 268 MB, ~63 us at the 4.25 TB/s an H200 copies
at, docs/benchmarks.md).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.t().contiguous()


M, N = 8192, 8192

REGIMES = {
    # CPU (interpreter). The expert's tiles are 64 x 64, in groups of 8 tile rows (expert.py);
    # the naive kernel runs one program per column of x, ~2 ms each in the interpreter, so N
    # stays small.
    # 2 x 2 tiles, partial along both dimensions: the masked path.
    "odd": dict(M=100, N=70),
    # 10 tile rows of one tile column: two groups of tile rows (8, then a partial group of 2);
    # fp16.
    "tall": dict(M=600, N=20, dtype=torch.float16),
    # Both dimensions multiples of 64: the unmasked path.
    "even": dict(M=128, N=64),
    # GPU (H200), 268 MB each.
    "square": dict(M=8192, N=8192, dtype=torch.bfloat16),
    # Short, wide rows of x become long columns of y, and the reverse.
    "wide": dict(M=1024, N=65536, dtype=torch.bfloat16),
    "tall_gpu": dict(M=65536, N=1024, dtype=torch.bfloat16),
    # fp32, neither dimension a multiple of the tile: the masked path at scale.
    "odd_fp32": dict(M=8191, N=4097, dtype=torch.float32),
}
CPU_REGIMES = ("odd", "tall", "even")


def get_inputs(M=M, N=N, dtype=torch.float32):
    return [torch.randn(M, N).to(dtype)]


def get_init_inputs():
    return []
