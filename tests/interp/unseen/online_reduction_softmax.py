"""Unseen kernel for online_reduction: row softmax with a reversed dispatch.

Different from the corpus: the looped branch comes first (`if cols > ONE_BLOCK_LIMIT`), the
looped kernel is a three-sweep chunked softmax (max, then sum, then write) rather than an
online max/sum, and the block is sized with next_power_of_2 inside the else branch. The limit
is low (512) so the CPU regime `odd` (N = 1023) takes the looped kernel.
Problem: src/klineage/examples/softmax.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

ONE_BLOCK_LIMIT = 512


@triton.jit
def one_block_softmax(src, dst, cols, s_src, s_dst, WIDTH: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, WIDTH)
    v = tl.load(src + row * s_src + c, mask=c < cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(dst + row * s_dst + c, (e / tl.sum(e, axis=0)).to(dst.dtype.element_ty), mask=c < cols)


@triton.jit
def chunked_softmax(src, dst, cols, s_src, s_dst, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, CHUNK)
    hi = tl.full([CHUNK], -float("inf"), tl.float32)
    for off in range(0, cols, CHUNK):
        v = tl.load(src + row * s_src + off + c, mask=off + c < cols, other=-float("inf"))
        hi = tl.maximum(hi, v.to(tl.float32))
    top = tl.max(hi, axis=0)
    acc = tl.zeros([CHUNK], tl.float32)
    for off in range(0, cols, CHUNK):
        v = tl.load(src + row * s_src + off + c, mask=off + c < cols, other=-float("inf"))
        acc += tl.exp(v.to(tl.float32) - top)
    total = tl.sum(acc, axis=0)
    for off in range(0, cols, CHUNK):
        v = tl.load(src + row * s_src + off + c, mask=off + c < cols, other=-float("inf"))
        y = tl.exp(v.to(tl.float32) - top) / total
        tl.store(dst + row * s_dst + off + c, y.to(dst.dtype.element_ty), mask=off + c < cols)


def run_softmax(x):
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    if cols > ONE_BLOCK_LIMIT:
        chunked_softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), CHUNK=128)
    else:
        width = triton.next_power_of_2(cols)
        one_block_softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), WIDTH=width)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return run_softmax(x)
