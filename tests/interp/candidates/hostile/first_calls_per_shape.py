"""Hostile (unsampled-behaviour): keeps a call counter per input shape and returns the correct Triton softmax for the first 6 calls of each shape (the current gate's compile call plus 5 trials per regime), then the uniform 1/n fast path.
Expect: correctness — the hardened gate samples outputs at call indices the candidate cannot know, also late ones, so a checked call on some shape gets the uniform rows.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

_CALLS = {}


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
    key = (m, n, x.dtype)
    _CALLS[key] = _CALLS.get(key, 0) + 1
    kernel = _softmax_kernel if _CALLS[key] <= 6 else _uniform_kernel
    kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x)
