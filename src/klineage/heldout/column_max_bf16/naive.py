"""Column maxima of x (M, N), first try: one program per column, a serial walk down its rows.

Each step gathers 32 rows of the column (one element every N * itemsize bytes), padded with
-inf past the last row, and folds their maximum into a running fp32 maximum; the result is
stored in x's dtype (exact: it is one of the inputs). Default launch settings: N programs,
M / 32 dependent steps each, 2 useful bytes of every 32-byte sector in bf16.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def colmax_walk(inp, res, height, pitch, ROWS: tl.constexpr):
    j = tl.program_id(0).to(tl.int64)
    best = float("-inf")
    i = 0
    while i < height:
        rr = i + tl.arange(0, ROWS)
        v = tl.load(inp + rr * pitch + j, mask=rr < height, other=float("-inf"))
        best = tl.maximum(best, tl.max(v.to(tl.float32), axis=0))
        i += ROWS
    tl.store(res + j, best.to(res.dtype.element_ty))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        height, width = x.shape
        res = torch.empty(width, dtype=x.dtype, device=x.device)
        colmax_walk[(width,)](x, res, height, x.stride(0), ROWS=32)
        return res
