"""Plain LayerNorm (no weight, no bias) in Triton, written the obvious way.

One program normalises one row: the row is a single masked block of next_power_of_2(N)
values, mean and biased variance are fp32 block reductions, and the centred row times
1/sqrt(var + eps) is written back. num_warps stays at its default of 4.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-5


@triton.jit
def _standardize_rows(src, dst, src_stride, dst_stride, width, eps, W_BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    pos = tl.arange(0, W_BLOCK)
    m = pos < width
    vals = tl.load(src + row * src_stride + pos, mask=m, other=0.0).to(tl.float32)
    avg = tl.sum(vals, axis=0) / width
    centred = tl.where(m, vals - avg, 0.0)
    variance = tl.sum(centred * centred, axis=0) / width
    out = centred / tl.sqrt(variance + eps)
    tl.store(dst + row * dst_stride + pos, out.to(dst.dtype.element_ty), mask=m)


class ModelNew(nn.Module):
    def __init__(self, eps=EPS):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        width = x.shape[-1]
        rows = x.reshape(-1, width).contiguous()
        out = torch.empty_like(rows)
        _standardize_rows[(rows.shape[0],)](
            rows,
            out,
            rows.stride(0),
            out.stride(0),
            width,
            self.eps,
            W_BLOCK=triton.next_power_of_2(width),
            num_warps=4,
        )
        return out.view(x.shape)
