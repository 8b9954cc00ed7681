"""Gemma RMSNorm, y = x * rsqrt(mean(x^2) + eps) * (1 + w): a first, untuned Triton kernel.

The grid has one program per row; a program reads its whole row as one masked block of
next_power_of_2(N) lanes, reduces in fp32 and writes the scaled row. (1 + w) is recomputed
from the weight by every program; num_warps is left at 4.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def gemma_rms_kernel(inp, scale, out, stride_in, stride_out, hidden, eps, LANES: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    idx = tl.arange(0, LANES)
    keep = idx < hidden
    v = tl.load(inp + r * stride_in + idx, mask=keep, other=0.0).to(tl.float32)
    ms = tl.sum(v * v, axis=0) / hidden
    factor = 1.0 / tl.sqrt(ms + eps)
    s = tl.load(scale + idx, mask=keep, other=0.0).to(tl.float32)
    res = v * factor * (1.0 + s)
    tl.store(out + r * stride_out + idx, res.to(out.dtype.element_ty), mask=keep)


def gemma_rmsnorm(x, weight, eps):
    hidden = x.shape[-1]
    flat = x.reshape(-1, hidden).contiguous()
    result = torch.empty_like(flat)
    gemma_rms_kernel[(flat.shape[0],)](
        flat,
        weight,
        result,
        flat.stride(0),
        result.stride(0),
        hidden,
        eps,
        LANES=triton.next_power_of_2(hidden),
        num_warps=4,
    )
    return result.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(0.5 * torch.randn(hidden_size))

    def forward(self, x):
        return gemma_rmsnorm(x, self.weight, self.eps)
