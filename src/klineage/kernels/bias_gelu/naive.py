"""Fused bias + GELU (tanh approximation) y = gelu_tanh(x + bias): the first kernel a newcomer
writes.

One program per row walks it 64 columns at a time: masked loads of x and of the bias (the
bias is read again by every row), the GELU in fp32 with tanh built from exp, a masked store;
default 4 warps. Correct for every shape, and slow: each iteration moves 128-256 bytes of x,
too little to hide the memory latency, and short rows leave most of a program idle.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_gelu_kernel(X, B, Y, N, stride_xm, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(X + row * stride_xm + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
        z = x + b
        u = 0.7978845608028654 * (z + 0.044715 * z * z * z)
        # tanh(u) = 2 / (1 + exp(-2u)) - 1: exp overflows to inf for u << 0, giving -1, and
        # underflows to 0 for u >> 0, giving 1; never inf / inf.
        t = 2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0
        y = 0.5 * z * (1.0 + t)
        tl.store(Y + row * stride_ym + cols, y.to(Y.dtype.element_ty), mask=mask)


def bias_gelu_forward(x, bias):
    x = x.contiguous()
    bias = bias.contiguous()
    M, N = x.shape
    y = torch.empty_like(x)
    _bias_gelu_kernel[(M,)](x, bias, y, N, x.stride(0), y.stride(0), BLOCK_N=64, num_warps=4)
    return y


class ModelNew(nn.Module):
    def forward(self, x, bias):
        return bias_gelu_forward(x, bias)
