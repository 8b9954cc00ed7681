"""Unseen kernel for pointer_advancement: an online row softmax whose pointers are advanced in
two loops of different shapes: `tl.range(1, n_chunks + 1)` (a start that is not 0, so the
backward rewrite needs `(_it - 1)`) and `range(0, n, CHUNK)` (a step, so `j // CHUNK`), with a
second, non-pointer `-=` counter next to the advance. ModelNew for
src/klineage/examples/softmax/problem.py."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _online_softmax(in_ptr, out_ptr, n, in_stride, out_stride, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, CHUNK)
    n_chunks = tl.cdiv(n, CHUNK)

    p_in = in_ptr + row * in_stride + lanes
    left = n
    m = -float("inf")
    d = 0.0
    for _it in tl.range(1, n_chunks + 1):
        x = tl.load(p_in, mask=lanes < left, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
        p_in += CHUNK
        left -= CHUNK

    q_in = in_ptr + row * in_stride + lanes
    q_out = out_ptr + row * out_stride + lanes
    for j in range(0, n, CHUNK):
        inside = j + lanes < n
        x = tl.load(q_in, mask=inside, other=0.0).to(tl.float32)
        tl.store(q_out, (tl.exp(x - m) / d).to(out_ptr.dtype.element_ty), mask=inside)
        q_in += CHUNK
        q_out += CHUNK


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, n = x.shape
        y = torch.empty_like(x)
        _online_softmax[(rows,)](x, y, n, x.stride(0), y.stride(0), CHUNK=64)
        return y
