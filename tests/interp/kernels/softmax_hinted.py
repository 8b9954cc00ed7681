"""A softmax with three cache hints: a small kernel for walk tests (three backward steps)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(
        x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"), eviction_policy="evict_first"
    )
    x = x.to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(
        y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs"
    )
    tl.store(
        y_ptr + row * stride_y + cols,
        y.to(y_ptr.dtype.element_ty),
        mask=mask,
        eviction_policy="evict_last",
    )


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        _softmax_kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
        return y
