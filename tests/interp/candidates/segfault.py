"""Adversarial: a kernel that loads through a wild pointer (segmentation fault in the interpreter)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _wild_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # 64 TiB past the row: no mapping there, so the load faults.
    x = tl.load(x_ptr + row * stride_x + cols + 1099511627776 * 64, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride_y + cols, x, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        _wild_kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
        return y
