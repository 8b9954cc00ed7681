"""x @ w.T + bias + residual in one Triton kernel (the adds fused after the K loop).

One program per 64x64 block of y, blocks taken row after row; w (N, K) is addressed as its
transpose through the strides. K advances 32 at a time, every load masked and its addresses
recomputed; fp32 accumulation, bias and residual added in fp32, one rounding at the store.
fp32 inputs multiply with input_precision="ieee" (TF32 would miss the 1e-4 tolerance).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _proj_add_residual(
    x_ptr,
    w_ptr,
    bias_ptr,
    res_ptr,
    y_ptr,
    M,
    N,
    K,
    x_s0,
    x_s1,
    w_s0,
    w_s1,
    r_s0,
    r_s1,
    y_s0,
    y_s1,
    FP32_EXACT: tl.constexpr,
    TILE_M: tl.constexpr,
    TILE_N: tl.constexpr,
    TILE_K: tl.constexpr,
):
    pid = tl.program_id(0)
    blocks_n = tl.cdiv(N, TILE_N)
    pm = pid // blocks_n
    pn = pid % blocks_n
    offs_m = pm * TILE_M + tl.arange(0, TILE_M)
    offs_n = pn * TILE_N + tl.arange(0, TILE_N)
    m_in = offs_m < M
    n_in = offs_n < N

    acc = tl.zeros((TILE_M, TILE_N), dtype=tl.float32)
    for k in range(0, K, TILE_K):
        offs_k = k + tl.arange(0, TILE_K)
        k_in = offs_k < K
        xp = x_ptr + offs_m[:, None] * x_s0 + offs_k[None, :] * x_s1
        wp = w_ptr + offs_n[None, :] * w_s0 + offs_k[:, None] * w_s1
        xt = tl.load(xp, mask=m_in[:, None] & k_in[None, :], other=0.0)
        wt = tl.load(wp, mask=k_in[:, None] & n_in[None, :], other=0.0)
        if FP32_EXACT:  # noqa: SIM108 (a constexpr branch, one dot per compiled variant)
            acc = tl.dot(xt, wt, acc, input_precision="ieee")
        else:
            acc = tl.dot(xt, wt, acc)

    out_mask = m_in[:, None] & n_in[None, :]
    b = tl.load(bias_ptr + offs_n, mask=n_in, other=0.0)
    r = tl.load(res_ptr + offs_m[:, None] * r_s0 + offs_n[None, :] * r_s1, mask=out_mask, other=0.0)
    acc = acc + b.to(tl.float32)[None, :] + r.to(tl.float32)
    tl.store(
        y_ptr + offs_m[:, None] * y_s0 + offs_n[None, :] * y_s1,
        acc.to(y_ptr.dtype.element_ty),
        mask=out_mask,
    )


def linear_plus_residual(x, w, bias, residual):
    M, K = x.shape
    N = w.shape[0]
    assert w.shape[1] == K and bias.numel() == N and residual.shape == (M, N), "shape mismatch"
    bias = bias.contiguous()
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    TILE_M, TILE_N, TILE_K = 64, 64, 32
    grid = (triton.cdiv(M, TILE_M) * triton.cdiv(N, TILE_N),)
    _proj_add_residual[grid](
        x, w, bias, residual, y,
        M, N, K,
        x.stride(0), x.stride(1),
        w.stride(0), w.stride(1),
        residual.stride(0), residual.stride(1),
        y.stride(0), y.stride(1),
        FP32_EXACT=x.dtype == torch.float32,
        TILE_M=TILE_M, TILE_N=TILE_N, TILE_K=TILE_K,
    )  # fmt: skip
    return y


class ModelNew(nn.Module):
    def forward(self, x, w, bias, residual):
        return linear_plus_residual(x, w, bias, residual)
