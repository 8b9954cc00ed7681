"""RMSNorm with several rows per program: what an LLM asked to apply rows_per_program to the
naive kernel should write (a [BLOCK_M, BLOCK_N] tile, BLOCK_M rows to a program)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rms_rows_kernel(X, W, Y, M, N, stride_x, stride_y, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None].to(tl.int64) * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + rows[:, None].to(tl.int64) * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


def rms_norm_forward(x, weight, eps=EPS):
    shape = x.shape
    N = shape[-1]
    x2 = x.reshape(-1, N).contiguous()
    M = x2.shape[0]
    y = torch.empty_like(x2)
    BLOCK_N = triton.next_power_of_2(N)
    BLOCK_M = min(max(4096 // BLOCK_N, 1), triton.next_power_of_2(M))
    grid = (triton.cdiv(M, BLOCK_M),)
    _rms_rows_kernel[grid](x2, weight, y, M, N, x2.stride(0), y.stride(0), eps, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return y.reshape(shape)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x):
        return rms_norm_forward(x, self.weight, self.eps)
