"""Causal attention, head dim 128, a straightforward Triton forward.

One program per (head, 64-row query block): grid axis 0 is batch*head, axis 1 the query block.
The program loops over every 32-key block of the sequence (no early exit at the diagonal);
keys past the end, and keys after the query row when CAUSAL is set, get a -inf score through
tl.where. Softmax is online (running max and sum, tl.exp), accumulation in fp32.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _causal_fwd_d128(
    Q,
    K,
    V,
    O,
    softmax_scale,
    sqb,
    sqh,
    sql,
    skb,
    skh,
    skl,
    svb,
    svh,
    svl,
    sob,
    soh,
    sol,
    num_heads,
    seqlen,
    D: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_KV: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    bh = tl.program_id(0)
    qb = tl.program_id(1)
    batch = bh // num_heads
    head = bh % num_heads

    offs_q = qb * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_kv = tl.arange(0, BLOCK_KV)
    offs_d = tl.arange(0, D)
    q_mask = offs_q < seqlen

    q_base = Q + batch * sqb + head * sqh
    k_base = K + batch * skb + head * skh
    v_base = V + batch * svb + head * svh
    q = tl.load(q_base + offs_q[:, None] * sql + offs_d[None, :], mask=q_mask[:, None], other=0.0)

    m = tl.full((BLOCK_Q,), float("-inf"), dtype=tl.float32)
    denom = tl.zeros((BLOCK_Q,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_Q, D), dtype=tl.float32)

    for kv0 in range(0, seqlen, BLOCK_KV):
        keys = kv0 + offs_kv
        k_mask = keys < seqlen
        k = tl.load(k_base + keys[:, None] * skl + offs_d[None, :], mask=k_mask[:, None], other=0.0)
        v = tl.load(v_base + keys[:, None] * svl + offs_d[None, :], mask=k_mask[:, None], other=0.0)

        s = tl.dot(q, tl.trans(k)) * softmax_scale
        keep = k_mask[None, :]
        if CAUSAL:
            keep = keep & (keys[None, :] <= offs_q[:, None])
        s = tl.where(keep, s, float("-inf"))

        m_next = tl.maximum(m, tl.max(s, axis=1))
        p = tl.exp(s - m_next[:, None])
        correction = tl.exp(m - m_next)
        denom = denom * correction + tl.sum(p, axis=1)
        acc = acc * correction[:, None]
        acc += tl.dot(p.to(v.dtype), v)
        m = m_next

    out = acc / denom[:, None]
    tl.store(
        O + batch * sob + head * soh + offs_q[:, None] * sol + offs_d[None, :],
        out.to(O.dtype.element_ty),
        mask=q_mask[:, None],
    )


def causal_attention(q, k, v):
    q = q.contiguous()
    k = k.contiguous()
    v = v.contiguous()
    B, H, L, D = q.shape
    o = torch.empty_like(q)
    BLOCK_Q, BLOCK_KV = 64, 32
    grid = (B * H, triton.cdiv(L, BLOCK_Q))
    _causal_fwd_d128[grid](
        q, k, v, o, 1.0 / math.sqrt(D),
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        o.stride(0), o.stride(1), o.stride(2),
        H, L,
        D=D, BLOCK_Q=BLOCK_Q, BLOCK_KV=BLOCK_KV, CAUSAL=True,
    )  # fmt: skip
    return o


class ModelNew(nn.Module):
    def forward(self, q, k, v):
        return causal_attention(q, k, v)
