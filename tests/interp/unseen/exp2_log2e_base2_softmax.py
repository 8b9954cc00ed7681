"""Unseen kernel for exp2_log2e: softmax through a base-2 log-sum-exp, written its own way.

Another alias for triton.language, log2(e) as 1/ln(2) under a name without LOG2E in it, exp2
reached through the math module, and a log2 whose result stays in base 2.
"""

import torch
import torch.nn as nn
import triton
from triton import language as tlang
from triton.language import constexpr  # the CPU interpreter only sees `tl.constexpr`/`constexpr`

RCP_LN2 = tlang.constexpr(1.0 / 0.6931471805599453)


@triton.jit
def softmax_rows_b2(inp, out, width, in_stride, out_stride, COLS: constexpr):
    r = tlang.program_id(0).to(tlang.int64)
    c = tlang.arange(0, COLS)
    keep = c < width
    v = tlang.load(inp + r * in_stride + c, mask=keep, other=float("-inf")).to(tlang.float32)
    top = tlang.max(v, axis=0)
    total = tlang.sum(tlang.math.exp2((v - top) * RCP_LN2), axis=0)
    # log2 of sum(exp(v)), so the normalised value is one more exp2
    lse2 = top * RCP_LN2 + tlang.log2(total)
    res = tlang.exp2(v * RCP_LN2 - lse2)
    tlang.store(out + r * out_stride + c, res.to(out.dtype.element_ty), mask=keep)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, width = x.shape
        y = torch.empty_like(x)
        cols = triton.next_power_of_2(width)
        softmax_rows_b2[(rows,)](x, y, width, x.stride(0), y.stride(0), COLS=cols)
        return y
