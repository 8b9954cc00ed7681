"""Reverse (suffix) cumsum along the last dimension: y[i, j] = sum_{k >= j} x[i, k], x (M, N).

The (undiscounted) returns-to-go of a reward sequence, or any right-to-left running total:
torch.flip(torch.cumsum(torch.flip(x, [-1]), -1), [-1]). Each output sums up to N terms, so the
order of the additions decides its last bits; the reference scans in fp32 for half inputs and
rounds once. Memory-bound: the floor is reading x once and writing y once, 524288 x 160 fp16 =
168 MB each way, ~79 us at the 4.25 TB/s an H200 copies at (docs/benchmarks.md, ceilings).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        xf = x.float().flip(-1)
        return torch.cumsum(xf, dim=-1).flip(-1).to(x.dtype)


M, N = 524288, 160

REGIMES = {
    # CPU (interpreter): one program per row in the naive kernel, a serial walk over the row in
    # chunks of 64 columns from its end, so rows are few. The interpreter scans a chunk one
    # fp32 addition after another; with 64-wide chunks and a carried total, fp32 rows of a
    # few hundred stay well within fp32's tolerance.
    "tiny": dict(M=3, N=45),  # one partial chunk
    "ragged": dict(M=4, N=300),  # 300 = 4 * 64 + 44: the last chunk (columns 0-43) partial
    "fp16": dict(M=5, N=200, dtype=torch.float16),
    # Two rows of 9000: split_scan's default step (4096) makes 3 steps and 3 segments a row,
    # so the CPU gate runs its totals and prefixes, not only its one-segment path.
    "long": dict(M=2, N=9000),
    # GPU (H200). Many short rows: 160 columns (3 chunks) per row, 524288 programs.
    "short_rows_fp16": dict(M=524288, N=160, dtype=torch.float16),
    # Few very long rows: 384 rows (under 3 per SM) of 200000 columns, 3125 chunks each.
    "long_rows_bf16": dict(M=384, N=200000, dtype=torch.bfloat16),
    # fp32 in the middle: 6144 rows of 12000.
    "mid_fp32": dict(M=6144, N=12000),
}
CPU_REGIMES = ("tiny", "ragged", "fp16", "long")


def get_inputs(M=M, N=N, dtype=torch.float32):
    return [torch.randn(M, N).to(dtype)]


def get_init_inputs():
    return []
