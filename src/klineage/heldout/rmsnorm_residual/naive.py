"""Residual add + RMSNorm, a first Triton version: one program per row.

Each program loads its row of x and of residual (the whole row in one masked block of
next_power_of_2(N) elements), adds them in fp32, reduces the sum of squares, and scales by
the weight, which every program reloads. Four warps, no tuning.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _add_rms_row(x_ptr, r_ptr, w_ptr, out_ptr, row_stride, n_cols, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    valid = offs < n_cols
    base = pid * row_stride
    a = tl.load(x_ptr + base + offs, mask=valid, other=0.0).to(tl.float32)
    b = tl.load(r_ptr + base + offs, mask=valid, other=0.0).to(tl.float32)
    h = a + b
    mean_sq = tl.sum(h * h, axis=0) / n_cols
    inv_rms = 1.0 / tl.sqrt(mean_sq + eps)
    g = tl.load(w_ptr + offs, mask=valid, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + offs, (h * inv_rms * g).to(out_ptr.dtype.element_ty), mask=valid)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x, residual):
        n_cols = x.shape[-1]
        xs = x.reshape(-1, n_cols).contiguous()
        rs = residual.reshape(-1, n_cols).contiguous()
        out = torch.empty_like(xs)
        n_rows = xs.shape[0]
        _add_rms_row[(n_rows,)](
            xs,
            rs,
            self.weight,
            out,
            xs.stride(0),
            n_cols,
            self.eps,
            BLOCK=triton.next_power_of_2(n_cols),
            num_warps=4,
        )
        return out.view(x.shape)
