"""Unseen kernel for software_pipelining: row softmax (src/klineage/examples/softmax/problem.py).

Differs from the corpus on purpose: `triton.language` imported as `T`, a persistent loop over
rows with `T.range(..., num_stages=3)`, and the kernel-wide depth given at the launch
(`num_stages=2`) instead of in an autotune table.
"""

import torch
import torch.nn as nn
import triton
import triton.language as T
from triton.language import constexpr


@triton.jit
def _softmax_rows(src, dst, n_rows, n_cols, ld, WIDTH: constexpr):
    first = T.program_id(0)
    step = T.num_programs(0)
    c = T.arange(0, WIDTH)
    inside = c < n_cols
    for r in T.range(first, n_rows, step, num_stages=3):
        x = T.load(src + r * ld + c, mask=inside, other=-float("inf")).to(T.float32)
        e = T.exp(x - T.max(x, 0))
        T.store(dst + r * ld + c, (e / T.sum(e, 0)).to(dst.dtype.element_ty), mask=inside)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        programs = min(rows, 8)
        _softmax_rows[(programs,)](
            x,
            y,
            rows,
            cols,
            x.stride(0),
            WIDTH=triton.next_power_of_2(cols),
            num_warps=4,
            num_stages=2,
        )
        return y
