"""Row-wise inclusive prefix sum (cumsum) over the last dimension of x (M, N).

y[i, j] = sum_{k <= j} x[i, k]. Each output element is a reduction of up to N terms, so the
order of the additions decides its last bits; the reference scans in fp32 for fp16/bf16 inputs
and rounds once. Memory-bound: the floor is reading x once and writing y once,
2 * M * N * itemsize bytes (8192 x 8192 bf16 = 268 MB, ~63 us at the 4.25 TB/s an H200 copies
at, docs/benchmarks.md). The regimes span the shapes where the expert's tricks differ: many
short rows (several rows per program), rows that fit one tile (one scan in registers), rows
longer than a tile (a loop of tile scans with a carried prefix), and too few rows to fill the
GPU (each row split into chunks over programs, the chunks' sums scanned first).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.dtype in (torch.float16, torch.bfloat16):
            return torch.cumsum(x.float(), dim=-1).to(x.dtype)
        return torch.cumsum(x, dim=-1)


M, N = 8192, 8192

REGIMES = {
    # CPU (interpreter). The expert's thresholds (expert.py): rows of N <= 8192 columns take the
    # one-tile kernel; longer rows the looped kernel in tiles of 4096, and fewer rows than
    # 2 per SM (the CPU has one pseudo-SM) are split into chunks of whole tiles.
    # The interpreter scans a tile with numpy's cumsum, one fp32 addition after another, so
    # long fp32 rows there carry a sequential rounding error the GPU's tree scan does not:
    # the long CPU regimes are fp16 (fp32 arithmetic inside, a tolerance of fp16 roundings).
    "tiny": dict(M=19, N=33),  # one partial 2-D tile of rows (32) and columns (64)
    # 35 rows of 300: 8 rows a program (5 programs, the last partial), fp16 in, fp32 scan.
    "fp16_short": dict(M=35, N=300, dtype=torch.float16),
    # 3 rows of 9000: the looped kernel, 3 tiles a row, the last ragged; no split (3 >= 2).
    "long_small": dict(M=3, N=9000, dtype=torch.float16),
    # One row of 20000: split into 2 chunks (12288 + 7712 columns), the second's prefix from
    # the first's sum.
    "split_small": dict(M=1, N=20000, dtype=torch.float16),
    # GPU (H200).
    "large": dict(M=8192, N=8192, dtype=torch.bfloat16),
    # 128 bytes a row: one row per program leaves most lanes idle and makes 1M programs.
    "short_rows": dict(M=1048576, N=64, dtype=torch.bfloat16),
    # 128 KB a row: the looped kernel, 16 tiles of 4096 a row, 1024 programs.
    "long_rows": dict(M=1024, N=65536, dtype=torch.bfloat16),
    # 128 rows for 132 SMs: one program per row leaves the GPU mostly idle; split 8 ways.
    "few_rows": dict(M=128, N=131072, dtype=torch.bfloat16),
    "fp32": dict(M=4096, N=8192, dtype=torch.float32),
}
CPU_REGIMES = ("tiny", "fp16_short", "long_small", "split_small")


def get_inputs(M=M, N=N, dtype=torch.float32):
    return [torch.randn(M, N).to(dtype)]


def get_init_inputs():
    return []
