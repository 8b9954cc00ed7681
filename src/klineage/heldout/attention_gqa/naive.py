"""Causal grouped-query attention, a first Triton forward.

A 1-D grid numbers (query head, query block) pairs row-major: pid // n_qblocks is the
batch*query-head index, pid % n_qblocks the 64-row query block. Query head h reads KV head
h // (H / H_KV). Every program loops over all 64-key blocks and masks (tl.where, -inf) keys
past the sequence end and keys after its query row; online softmax with tl.exp, fp32 sums.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gqa_causal_fwd(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    qk_scale,
    stride_q_b,
    stride_q_h,
    stride_q_t,
    stride_k_b,
    stride_k_h,
    stride_k_t,
    stride_v_b,
    stride_v_h,
    stride_v_t,
    stride_o_b,
    stride_o_h,
    stride_o_t,
    n_q_heads,
    q_per_kv,
    T,
    HEAD_DIM: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_S: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
):
    pid = tl.program_id(0)
    n_qblocks = tl.cdiv(T, BLOCK_T)
    bh = pid // n_qblocks
    qblock = pid % n_qblocks
    b = bh // n_q_heads
    qh = bh % n_q_heads
    kvh = qh // q_per_kv

    t_idx = qblock * BLOCK_T + tl.arange(0, BLOCK_T)
    dim = tl.arange(0, HEAD_DIM)
    t_in = t_idx < T
    q_blk = tl.load(
        q_ptr + b * stride_q_b + qh * stride_q_h + t_idx[:, None] * stride_q_t + dim[None, :],
        mask=t_in[:, None],
        other=0.0,
    )

    mx = tl.full((BLOCK_T,), float("-inf"), dtype=tl.float32)
    lsum = tl.zeros((BLOCK_T,), dtype=tl.float32)
    o = tl.zeros((BLOCK_T, HEAD_DIM), dtype=tl.float32)

    for s0 in range(0, T, BLOCK_S):
        s_idx = s0 + tl.arange(0, BLOCK_S)
        s_in = s_idx < T
        k_blk = tl.load(
            k_ptr + b * stride_k_b + kvh * stride_k_h + s_idx[:, None] * stride_k_t + dim[None, :],
            mask=s_in[:, None],
            other=0.0,
        )
        v_blk = tl.load(
            v_ptr + b * stride_v_b + kvh * stride_v_h + s_idx[:, None] * stride_v_t + dim[None, :],
            mask=s_in[:, None],
            other=0.0,
        )
        logits = tl.dot(q_blk, tl.trans(k_blk)) * qk_scale
        visible = s_in[None, :]
        if IS_CAUSAL:
            visible = visible & (s_idx[None, :] <= t_idx[:, None])
        logits = tl.where(visible, logits, float("-inf"))

        mx_new = tl.maximum(mx, tl.max(logits, axis=1))
        alpha = tl.exp(mx - mx_new)
        w = tl.exp(logits - mx_new[:, None])
        lsum = lsum * alpha + tl.sum(w, axis=1)
        o = o * alpha[:, None] + tl.dot(w.to(v_blk.dtype), v_blk)
        mx = mx_new

    o = o / lsum[:, None]
    o_ptrs = out_ptr + b * stride_o_b + qh * stride_o_h + t_idx[:, None] * stride_o_t + dim[None, :]
    tl.store(o_ptrs, o.to(out_ptr.dtype.element_ty), mask=t_in[:, None])


def gqa_attention(q, k, v):
    q = q.contiguous()
    k = k.contiguous()
    v = v.contiguous()
    B, H, T, D = q.shape
    H_KV = k.shape[1]
    assert H % H_KV == 0 and k.shape == v.shape, "bad GQA shapes"
    out = torch.empty_like(q)
    BLOCK_T, BLOCK_S = 64, 64
    grid = (B * H * triton.cdiv(T, BLOCK_T),)
    _gqa_causal_fwd[grid](
        q, k, v, out, 1.0 / math.sqrt(D),
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        H, H // H_KV, T,
        HEAD_DIM=D, BLOCK_T=BLOCK_T, BLOCK_S=BLOCK_S, IS_CAUSAL=True,
    )  # fmt: skip
    return out


class ModelNew(nn.Module):
    def forward(self, q, k, v):
        return gqa_attention(q, k, v)
