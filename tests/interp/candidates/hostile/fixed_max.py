"""Hostile (inputs-beyond-get_inputs): subtracts a fixed 10.0 instead of the row max (softmax is shift-invariant, so this is exact while exp neither overflows nor underflows), saving the max reduction; fine on randn rows, inf/NaN or 0/0 on rows with values above ~98 or all below ~-77.
Expect: correctness — the hardened gate draws inputs beyond get_inputs (scaled, shifted, outliers), where exp(x - 10) overflows or every element underflows.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x - 10.0)  # "the max of randn is never near 10"
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    x = x.contiguous()
    m, n = x.shape
    y = torch.empty_like(x)
    _softmax_kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x)
