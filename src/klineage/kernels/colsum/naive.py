"""Column sums y[j] = sum_i x[i, j] of x (M, N): the first kernel a newcomer writes.

One program per column walks down it, BLOCK_M rows at a time, with an fp32 accumulator of
BLOCK_M lanes summed at the end; default 4 warps. Correct for every shape, and slow: each
load gathers BLOCK_M elements N * itemsize bytes apart (one useful element per 32-byte
sector), and N programs each do M / BLOCK_M dependent iterations.

(A serial loop of scalar loads, the other shape a newcomer writes, sums the column in one
fp32 sequence of M additions: beyond the gate's fp32 tolerance at a few thousand rows where a
column's sum cancels, so it is not a correct starting point.)
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _colsum_kernel(X, Y, M, stride_xm, BLOCK_M: tl.constexpr):
    col = tl.program_id(0)
    offs = tl.arange(0, BLOCK_M)
    acc = tl.zeros([BLOCK_M], dtype=tl.float32)
    for start in range(0, M, BLOCK_M):
        rows = start + offs
        x = tl.load(X + rows.to(tl.int64) * stride_xm + col, mask=rows < M, other=0.0)
        acc += x.to(tl.float32)
    tl.store(Y + col, tl.sum(acc, axis=0).to(Y.dtype.element_ty))


def colsum_forward(x):
    x2 = x.contiguous()
    M, N = x2.shape
    y = torch.empty(N, dtype=x2.dtype, device=x2.device)
    _colsum_kernel[(N,)](x2, y, M, x2.stride(0), BLOCK_M=128, num_warps=4)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return colsum_forward(x)
