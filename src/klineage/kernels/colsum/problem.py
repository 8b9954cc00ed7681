"""Column sums of a 2-D tensor: y[j] = sum_i x[i, j], a reduction over dim 0 of x (M, N).

The reduction runs across rows, so the contiguous dimension (N) is the one that is kept: a
kernel must read x along its rows (coalesced) while summing down its columns. The reference
sums in fp32 for fp16/bf16 inputs and rounds once, so it is itself accurate.

Memory-bound: the floor is reading x once (the output is N values): 8192 x 16384 bf16 =
268 MB, ~63 us at the 4.25 TB/s an H200 copies at (docs/benchmarks.md, ceilings). The GPU
regimes span the three shapes where the expert's tricks differ: many rows and few column
blocks (the rows must be split over programs, partial sums combined by a second kernel), few
rows and many columns (one program per column block is already enough programs), and the
square middle.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.dtype in (torch.float16, torch.bfloat16):
            return x.float().sum(dim=0).to(x.dtype)
        return x.sum(dim=0)


M, N = 8192, 16384

REGIMES = {
    # CPU (interpreter): the expert runs 1 pseudo-SM there, so it splits the rows when one
    # column block would leave its 8 target programs idle (expert.py). The naive kernel runs one
    # program per column and the interpreter pays ~2 ms a program, so N stays small: no CPU
    # regime has two column blocks of the expert's (the GPU regimes all do).
    # One partial tile of rows and columns: no split (37 rows are fewer than a split's minimum).
    "tiny": dict(M=37, N=13),
    # 1100 rows of 10 columns: 3 row splits of 512 rows, 2 tiles of 256 rows each (the last
    # split ragged, 76 rows), then the second kernel sums the 3 partials; fp32 over 1100 rows
    # exercises the blocked accumulation.
    "tall_small": dict(M=1100, N=10),
    # fp16 in, fp32 partials, fp16 out from the second kernel: 2 splits (512 + 88 rows).
    "fp16_split": dict(M=600, N=6, dtype=torch.float16),
    # GPU (H200), ~268 MB of x each; the expert runs 512-1024 programs in each. 2048 columns
    # are 8 column blocks of 256 for 132 SMs: a one-stage kernel would run 8 programs, so the
    # rows are split 128 ways (512 rows each).
    "tall": dict(M=65536, N=2048, dtype=torch.bfloat16),
    # 512 rows of 256K columns: 1024 column blocks, no split; each program's loop is short.
    "wide": dict(M=512, N=262144, dtype=torch.bfloat16),
    # The square middle: 64 column blocks, each split 16 ways.
    "square": dict(M=8192, N=16384, dtype=torch.bfloat16),
    # fp32 (twice the bytes per tile): 128 column blocks, each split 4 ways.
    "fp32": dict(M=2048, N=32768, dtype=torch.float32),
    # Many rows, few columns (a feature sum over a long batch axis), 128 MB: one column block,
    # so the rows carry all the parallelism (split 1056 ways on 132 SMs, 8 programs per SM); one
    # program per column runs 32 programs of 2M serial rows.
    "narrow": dict(M=2097152, N=32, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "tall_small", "fp16_split")


def get_inputs(M=M, N=N, dtype=torch.float32):
    return [torch.randn(M, N).to(dtype)]


def get_init_inputs():
    return []
