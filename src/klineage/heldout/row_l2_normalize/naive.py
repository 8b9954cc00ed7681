"""Row L2 normalisation, y = x / max(||x||, eps), written as a first Triton kernel.

A 1-D grid, one program per row; the program loads the whole row as one masked block of
next_power_of_2(N) lanes, sums the squares in fp32, clamps the norm at eps and divides.
num_warps = 4, nothing tuned.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-12


@triton.jit
def unit_norm_rows(a_ptr, b_ptr, a_stride, b_stride, dim, eps, DIM_P2: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)
    t = tl.arange(0, DIM_P2)
    inside = t < dim
    v = tl.load(a_ptr + n * a_stride + t, mask=inside, other=0.0).to(tl.float32)
    length = tl.sqrt(tl.sum(v * v, axis=0))
    denom = tl.maximum(length, eps)
    tl.store(b_ptr + n * b_stride + t, (v / denom).to(b_ptr.dtype.element_ty), mask=inside)


class ModelNew(nn.Module):
    def __init__(self, eps=EPS):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        dim = x.shape[-1]
        a = x.reshape(-1, dim).contiguous()
        b = torch.empty_like(a)
        unit_norm_rows[(a.shape[0],)](
            a,
            b,
            a.stride(0),
            b.stride(0),
            dim,
            self.eps,
            DIM_P2=triton.next_power_of_2(dim),
            num_warps=4,
        )
        return b.view(x.shape)
