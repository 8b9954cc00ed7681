"""Unseen causal attention for causal_block_skipping (problem: kernels/attention/problem.py).

Unlike the corpus expert: one kernel, no helper, one key loop whose bound stops at the diagonal
when causal (`stop = ... if CAUSAL else seq_len`), the causal mask applied in every iteration,
-inf masking with exp (not exp2), columns-before-rows comparison, `lang` alias, other names.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as lang
from triton.language import constexpr  # bare: the 3.9 interpreter misreads `lang.constexpr`


@triton.jit
def flash_rows(
    q_base,
    k_base,
    v_base,
    o_base,
    scale,
    seq_len,
    stride_bh,
    stride_row,
    BLOCK_Q: constexpr,
    BLOCK_K: constexpr,
    DIM: constexpr,
    CAUSAL: constexpr,
):
    qb = lang.program_id(0)
    bh = lang.program_id(1)
    base = bh.to(lang.int64) * stride_bh
    q_rows = qb * BLOCK_Q + lang.arange(0, BLOCK_Q)
    dims = lang.arange(0, DIM)
    keys = lang.arange(0, BLOCK_K)
    row_ok = q_rows < seq_len
    tile = q_rows[:, None] * stride_row + dims[None, :]
    qt = lang.load(q_base + base + tile, mask=row_ok[:, None], other=0.0)

    run_max = lang.full([BLOCK_Q], float("-inf"), lang.float32)
    run_sum = lang.zeros([BLOCK_Q], lang.float32)
    out = lang.zeros([BLOCK_Q, DIM], lang.float32)
    # Keys past the last row of this query block are all masked when causal: stop there.
    stop = lang.minimum((qb + 1) * BLOCK_Q, seq_len) if CAUSAL else seq_len
    for kb in range(0, stop, BLOCK_K):
        kcols = kb + keys
        kv_ok = kcols < seq_len
        kv_tile = kcols[:, None] * stride_row + dims[None, :]
        kt = lang.load(k_base + base + kv_tile, mask=kv_ok[:, None], other=0.0)
        s = lang.dot(qt, lang.trans(kt)) * scale
        keep = kv_ok[None, :]
        if CAUSAL:
            keep = keep & (kcols[None, :] <= q_rows[:, None])
        s = lang.where(keep, s, float("-inf"))
        new_max = lang.maximum(run_max, lang.max(s, 1))
        p = lang.exp(s - new_max[:, None])
        corr = lang.exp(run_max - new_max)
        run_sum = run_sum * corr + lang.sum(p, 1)
        vt = lang.load(v_base + base + kv_tile, mask=kv_ok[:, None], other=0.0)
        out = out * corr[:, None] + lang.dot(p.to(vt.dtype), vt)
        run_max = new_max

    out = out / run_sum[:, None]
    lang.store(o_base + base + tile, out.to(o_base.dtype.element_ty), mask=row_ok[:, None])


class ModelNew(nn.Module):
    def __init__(self, causal):
        super().__init__()
        self.causal = bool(causal)

    def forward(self, q, k, v):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        B, H, L, D = q.shape
        o = torch.empty_like(q)
        grid = (triton.cdiv(L, 32), B * H)
        flash_rows[grid](
            q, k, v, o, 1.0 / math.sqrt(D), L, q.stride(1), q.stride(2),
            BLOCK_Q=32, BLOCK_K=32, DIM=D, CAUSAL=self.causal,
        )  # fmt: skip
        return o
