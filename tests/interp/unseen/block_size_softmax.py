"""Unseen kernel for block_size: row softmax (src/klineage/examples/softmax/problem.py).

Differs from the corpus on purpose: a module constant COL_TILE for the column chunk, a
lowercase launcher local `block_r` for the rows per program, and a 2-D [ROWS, TILE] online
softmax that loops over column chunks.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

COL_TILE = 256


@triton.jit
def softmax_tiles(x_ptr, y_ptr, n_rows, n_cols, ld, ROWS: tl.constexpr, TILE: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    base = rows.to(tl.int64)[:, None] * ld
    cols = tl.arange(0, TILE)
    m = tl.full([ROWS], -float("inf"), tl.float32)
    s = tl.zeros([ROWS], tl.float32)
    for c0 in range(0, n_cols, TILE):
        ok = row_ok[:, None] & ((c0 + cols) < n_cols)[None, :]
        x = tl.load(x_ptr + base + c0 + cols[None, :], mask=ok, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, 1))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.sum(tl.exp(x - m_safe[:, None]), 1)
        m = m_new
    for c0 in range(0, n_cols, TILE):
        ok = row_ok[:, None] & ((c0 + cols) < n_cols)[None, :]
        x = tl.load(x_ptr + base + c0 + cols[None, :], mask=ok, other=0.0).to(tl.float32)
        y = tl.exp(x - m[:, None]) / s[:, None]
        tl.store(y_ptr + base + c0 + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=ok)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block_r = 32
        grid = (triton.cdiv(n_rows, block_r),)
        softmax_tiles[grid](x, y, n_rows, n_cols, x.stride(0), ROWS=block_r, TILE=COL_TILE)
        return y
