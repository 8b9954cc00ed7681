"""Per-column mean of a tall matrix: y[j] = mean_i x[i, j] over dim 0 of x (M, N), M >> N.

The statistics pass of a batch norm over (tokens, channels): many rows, few columns. The
reduction runs down the columns while memory is contiguous along the rows, so a kernel has
to read whole rows (coalesced) and still have enough programs when N is small: with 768
columns, one program per column is 768 programs, each walking 131072 rows. The reference
accumulates in fp32 for fp16 inputs and rounds once.

Memory-bound: the floor is reading x once (N outputs): 131072 x 768 fp32 = 403 MB, ~95 us at
the 4.25 TB/s an H200 copies at (docs/benchmarks.md, ceilings).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.float().mean(dim=0).to(x.dtype)


M, N = 131072, 768

REGIMES = {
    # CPU (interpreter): one program per column in the naive kernel, each a serial walk down
    # its rows, so N stays in single digits. A dropped row moves a column's mean by x/M:
    # 420 fp32 rows leave it ~3e-3, thirty times fp32's tolerance.
    "tiny": dict(M=29, N=5),  # rows fewer than one step of the walk: the masked tail only
    "tall_fp32": dict(M=420, N=4),  # 27 steps, the last one ragged (420 = 26 * 16 + 4)
    "fp16": dict(M=90, N=11, dtype=torch.float16),
    # GPU (H200). Tall fp32: 768 columns, 131072 rows each.
    "tall_fp32_gpu": dict(M=131072, N=768),
    # Taller and narrower, fp16: 256 columns (fewer programs than 2 per SM) of 393216 rows.
    "tall_fp16_gpu": dict(M=393216, N=256, dtype=torch.float16),
    # Few rows, many columns: 49152 columns of 2048 rows; plenty of programs, short walks.
    "wide_fp32_gpu": dict(M=2048, N=49152),
}
CPU_REGIMES = ("tiny", "tall_fp32", "fp16")


def get_inputs(M=M, N=N, dtype=torch.float32):
    # A per-column offset: channel means of real activations are not zero.
    return [(torch.randn(M, N) + torch.randn(N)).to(dtype)]


def get_init_inputs():
    return []
