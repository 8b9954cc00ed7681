"""LayerNorm forward, y = (x - mean) * rsqrt(var + eps) * weight + bias: the first kernel a
newcomer writes.

One program per row, the whole row in one block of next_power_of_2(N) elements, fp32 math,
weight and bias loaded by every row, default 4 warps.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-5


@triton.jit
def _layer_norm_kernel(X, W, B, Y, stride_x, stride_y, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w + b
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


def layer_norm_forward(x, weight, bias, eps=EPS):
    shape = x.shape
    N = shape[-1]
    x2 = x.reshape(-1, N).contiguous()
    M = x2.shape[0]
    y = torch.empty_like(x2)
    _layer_norm_kernel[(M,)](
        x2,
        weight,
        bias,
        y,
        x2.stride(0),
        y.stride(0),
        N,
        eps,
        BLOCK_N=triton.next_power_of_2(N),
        num_warps=4,
    )
    return y.reshape(shape)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))
        self.bias = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x):
        return layer_norm_forward(x, self.weight, self.bias, self.eps)
