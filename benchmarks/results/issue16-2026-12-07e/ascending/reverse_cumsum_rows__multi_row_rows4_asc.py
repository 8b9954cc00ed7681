"""Suffix sums along each row of x (M, N), a newcomer's version: one program per row.

The program walks its row from the end in chunks of 64 columns: it loads the chunk back to
front (positions n-1, n-2, ... of what is left), scans it forward with tl.cumsum in fp32, adds
the total of the chunks already done, stores the chunk at the same positions and carries its
sum on. Default launch settings; one short program per row when rows are short, and one long
serial walk per row when they are long and few.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def suffix_scan_row(x_ptr, y_ptr, n, pitch, CHUNK: tl.constexpr, n_rows, ROWS: tl.constexpr):
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS))[:, None]
    row_ok = rows < n_rows
    row = rows.to(tl.int64)
    src = x_ptr + row * pitch
    dst = y_ptr + row * pitch
    carried = tl.full((ROWS, 1), 0.0, tl.float32)
    for done in range(0, n, CHUNK):
        pos = (n - done - CHUNK) + tl.arange(0, CHUNK)[None, :]
        inside = pos >= 0
        v = tl.load(src + pos, mask=inside & row_ok, other=0.0).to(tl.float32)
        out = carried + tl.cumsum(v, axis=1, reverse=True)
        tl.store(dst + pos, out.to(y_ptr.dtype.element_ty), mask=inside & row_ok)
        carried += tl.sum(v, axis=1, keep_dims=True)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, n = x.shape
        y = torch.empty_like(x)
        # multi_row: fixed; short rows fill a program
        ROWS = 4
        suffix_scan_row[(triton.cdiv(rows, ROWS),)](x, y, n, x.stride(0), CHUNK=64, n_rows=rows, ROWS=ROWS)
        return y
