"""Hostile (inputs-beyond-get_inputs): skips the row-max pass by clamping x to [-8, 8] before exp (exp(8) cannot overflow), which never bites on randn inputs of scale 1 and is wrong as soon as values leave [-8, 8].
Expect: correctness — the hardened gate also draws inputs beyond get_inputs (scaled by 10-100, signed outliers), where clamped rows lose their peaks.
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
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-8.0).to(tl.float32)
    x = tl.minimum(tl.maximum(x, -8.0), 8.0)  # "safe" range: no max reduction needed
    num = tl.where(mask, tl.exp(x), 0.0)
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
