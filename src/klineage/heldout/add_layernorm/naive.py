"""Residual add + LayerNorm, a straightforward Triton kernel: one program per row.

A program loads x and residual for its row (one masked block of next_power_of_2(N) lanes),
sums them in fp32, takes the mean, then the biased variance of the centred values, and applies
weight and bias (reloaded by every program). Default 4 warps, nothing tuned.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-5


@triton.jit
def add_ln_row_kernel(
    x_ptr, res_ptr, gamma_ptr, beta_ptr, y_ptr, stride, n, eps, BLOCK_COLS: tl.constexpr
):
    i = tl.program_id(0).to(tl.int64)
    j = tl.arange(0, BLOCK_COLS)
    in_row = j < n
    start = i * stride
    a = tl.load(x_ptr + start + j, mask=in_row, other=0.0).to(tl.float32)
    r = tl.load(res_ptr + start + j, mask=in_row, other=0.0).to(tl.float32)
    s = a + r
    mu = tl.sum(s, axis=0) / n
    d = tl.where(in_row, s - mu, 0.0)
    var = tl.sum(d * d, axis=0) / n
    inv_std = 1.0 / tl.sqrt(var + eps)
    gamma = tl.load(gamma_ptr + j, mask=in_row, other=0.0).to(tl.float32)
    beta = tl.load(beta_ptr + j, mask=in_row, other=0.0).to(tl.float32)
    y = d * inv_std * gamma + beta
    tl.store(y_ptr + start + j, y.to(y_ptr.dtype.element_ty), mask=in_row)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))
        self.bias = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x, residual):
        n = x.shape[-1]
        x2 = x.reshape(-1, n).contiguous()
        r2 = residual.reshape(-1, n).contiguous()
        y2 = torch.empty_like(x2)
        add_ln_row_kernel[(x2.shape[0],)](
            x2,
            r2,
            self.weight,
            self.bias,
            y2,
            x2.stride(0),
            n,
            self.eps,
            BLOCK_COLS=triton.next_power_of_2(n),
            num_warps=4,
        )
        return y2.view(x.shape)
