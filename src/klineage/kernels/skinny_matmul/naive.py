"""y = x @ w for a small output and a long K, the first attempt: one program per output.

Program (row, col) of a 2-D (M, N) grid walks all of K, 64 at a time: it loads 64 values of
x's row (contiguous) and 64 of w's column, multiplies them in fp32 into a 64-lane vector, and
sums the lanes once at the end. Correct at every shape, and slow at the shapes it is for: only
M * N programs (4096 at 64 x 64, some 31 a SM, each K / 64 = 4096 dependent steps at K = 256K),
so the loop's latency, not the bandwidth, sets the time; w is read down a column, N elements
apart (one useful element per 32-byte sector at N >= 16); every row of x is read once per
column of the output and every column of w once per row (64 times at 64 x 64); and the
multiply-adds run on the FMA units, never on the tensor cores.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_col_dot_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    K,
    stride_xm,
    stride_xk,
    stride_wk,
    stride_wn,
    stride_ym,
    stride_yn,
    BLOCK_K: tl.constexpr,
):
    row = tl.program_id(0)
    col = tl.program_id(1)
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        offs = start + tl.arange(0, BLOCK_K)
        in_k = offs < K
        x = tl.load(x_ptr + row * stride_xm + offs * stride_xk, mask=in_k, other=0.0)
        w = tl.load(w_ptr + offs * stride_wk + col * stride_wn, mask=in_k, other=0.0)
        acc += x.to(tl.float32) * w.to(tl.float32)
    tl.store(
        y_ptr + row * stride_ym + col * stride_yn, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty)
    )


class ModelNew(nn.Module):
    def forward(self, x, w):
        M, K = x.shape
        N = w.shape[1]
        y = torch.empty((M, N), dtype=x.dtype, device=x.device)
        _row_col_dot_kernel[(M, N)](
            x,
            w,
            y,
            K,
            x.stride(0),
            x.stride(1),
            w.stride(0),
            w.stride(1),
            y.stride(0),
            y.stride(1),
            BLOCK_K=64,
        )
        return y
