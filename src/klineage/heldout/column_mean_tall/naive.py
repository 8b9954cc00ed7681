"""Column means of x (M, N), the first Triton version: one program per column.

The program walks down its column 16 rows at a time (a strided gather, one element per row),
adds each step's 16 values into one fp32 running total, and divides by M at the end. Default
launch settings. Correct at any shape; slow when columns are long and few: each load uses 2-4
bytes of a 32-byte sector, and N programs (768 for 132 SMs) each make M / 16 dependent steps.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_down_column(src, dst, n_rows, row_pitch, STEP: tl.constexpr):
    c = tl.program_id(0)
    total = 0.0
    for top in range(0, n_rows, STEP):
        r = top + tl.arange(0, STEP)
        vals = tl.load(src + r.to(tl.int64) * row_pitch + c, mask=r < n_rows, other=0.0)
        total += tl.sum(vals.to(tl.float32), axis=0)
    tl.store(dst + c, (total / n_rows).to(dst.dtype.element_ty))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty(n_cols, dtype=x.dtype, device=x.device)
        mean_down_column[(n_cols,)](x, out, n_rows, x.stride(0), STEP=16)
        return out
