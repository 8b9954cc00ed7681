"""Unseen kernel for rows_per_program: row softmax, R rows per program.

Different from the corpus: `triton.language as lang` and a bare `constexpr` annotation (the
CPU interpreter only recognises `tl.constexpr` or `constexpr`), the rows-per-program name is
`rows_per_prog` (kernel parameter R), the grid is a hand-written ceil-division inside the
launch, and the launcher is ModelNew.forward itself. Problem: src/klineage/examples/softmax.
"""

import torch
import torch.nn as nn
import triton
import triton.language as lang
from triton.language import constexpr

TILE = 2048


@triton.jit
def softmax_tile(out, inp, ld_out, ld_in, rows, cols, R: constexpr, C: constexpr):
    r = lang.program_id(0) * R + lang.arange(0, R)
    c = lang.arange(0, C)
    r_in = lang.minimum(r, rows - 1)  # rows past the end re-read the last row, never stored
    v = lang.load(
        inp + r_in[:, None] * ld_in + c[None, :], mask=(c < cols)[None, :], other=-float("inf")
    ).to(lang.float32)
    e = lang.exp(v - lang.max(v, axis=1)[:, None])
    y = e / lang.sum(e, axis=1)[:, None]
    keep = (r < rows)[:, None] & (c < cols)[None, :]
    lang.store(out + r[:, None] * ld_out + c[None, :], y.to(out.dtype.element_ty), mask=keep)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        C = triton.next_power_of_2(cols)
        rows_per_prog = max(TILE // C, 1)
        softmax_tile[((rows + rows_per_prog - 1) // rows_per_prog,)](
            y, x, y.stride(0), x.stride(0), rows, cols, R=rows_per_prog, C=C
        )
        return y
