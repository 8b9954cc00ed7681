"""Unseen kernel for num_warps: softmax with warps set two other ways.

Short rows: an autotuned multi-row kernel whose Configs give num_warps positionally and by
keyword (`from triton import Config`). Long rows: a one-row kernel launched with a num_warps
computed inline from the block width.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton import Config


@triton.autotune(
    configs=[Config({"ROWS": 1}, 2), Config({"ROWS": 4}, num_warps=8, num_stages=1)],
    key=["n_cols"],
)
@triton.jit
def rows_softmax(x_ptr, y_ptr, n_rows, n_cols, sx, sy, COLS: tl.constexpr, ROWS: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, COLS)
    m = (r[:, None] < n_rows) & (c[None, :] < n_cols)
    rr = tl.minimum(r, n_rows - 1)  # rows past the end re-read the last row, never stored
    x = tl.load(
        x_ptr + rr[:, None] * sx + c[None, :], mask=c[None, :] < n_cols, other=-float("inf")
    )
    x = x.to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(y_ptr + r[:, None] * sy + c[None, :], y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def row_softmax(x_ptr, y_ptr, n_cols, sx, sy, COLS: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, COLS)
    x = tl.load(x_ptr + row * sx + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(
        y_ptr + row * sy + c, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=c < n_cols
    )


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        cols = triton.next_power_of_2(n_cols)
        if cols <= 256:
            grid = lambda meta: (triton.cdiv(n_rows, meta["ROWS"]),)  # noqa: E731
            rows_softmax[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0), COLS=cols)
        else:
            row_softmax[(n_rows,)](
                x, y, n_cols, x.stride(0), y.stride(0), COLS=cols,
                num_warps=max(4, min(16, cols // 512)),
            )  # fmt: skip
        return y
