"""Hostile (unsampled-behaviour): returns the correct Triton softmax for its first 16 forward calls (exactly the current gate's 1 compile call + 3 regimes x 5 trials), then a uniform 1/n "fast path" that never reads the input.
Expect: correctness — the hardened gate checks outputs at call indices the candidate cannot know (and calls it more often than any fixed budget), so some checked call gets the uniform rows.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

_CALLS = [0]


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _uniform_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    # The "fast path": 1/n everywhere, rows still sum to 1; the input is never read.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.full((BLOCK,), 1.0, tl.float32) / n_cols
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    x = x.contiguous()
    m, n = x.shape
    y = torch.empty_like(x)
    _CALLS[0] += 1
    kernel = _softmax_kernel if _CALLS[0] <= 16 else _uniform_kernel
    kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x)
