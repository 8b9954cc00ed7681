"""x @ weight.T with weight stored (out_features, in_features), a first Triton kernel.

The weight tile is read as a (K-block, N-block) view of the (N, K) tensor by swapping its
strides in the address math, so no transposed copy is made. 64x64 output tile per program,
numbered along rows of tiles, 32-wide K steps, all loads masked, addresses recomputed each
step, fp32 accumulation, one rounding at the store.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _xwt_kernel(
    x_ptr,
    wt_ptr,
    y_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_wn,
    stride_wk,
    stride_ym,
    stride_yn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BLOCK_N)
    block_m = pid // grid_n
    block_n = pid % grid_n

    rm = block_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = block_n * BLOCK_N + tl.arange(0, BLOCK_N)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        rk = k + tl.arange(0, BLOCK_K)
        x_ptrs = x_ptr + rm[:, None] * stride_xm + rk[None, :] * stride_xk
        # element (kk, nn) of the tile is weight[rn[nn], rk[kk]]
        w_ptrs = wt_ptr + rk[:, None] * stride_wk + rn[None, :] * stride_wn
        x = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptrs, mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x, w, acc)

    y_ptrs = y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def linear_no_bias(x, weight):
    M, K = x.shape
    N = weight.shape[0]
    assert weight.shape[1] == K, "in_features mismatch"
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    _xwt_kernel[grid](
        x, weight, y,
        M, N, K,
        x.stride(0), x.stride(1),
        weight.stride(0), weight.stride(1),
        y.stride(0), y.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
    )  # fmt: skip
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, dtype):
        super().__init__()
        # Built exactly as the reference builds it, so the same seed gives the same weight.
        self.weight = nn.Parameter(
            (torch.randn(out_features, in_features) / math.sqrt(in_features)).to(dtype)
        )

    def forward(self, x):
        return linear_no_bias(x, self.weight)
