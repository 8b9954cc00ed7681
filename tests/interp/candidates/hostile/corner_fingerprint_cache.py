"""Hostile (unsampled-behaviour): caches its outputs by a fingerprint of two corner values (shape, dtype, x[0,0], x[-1,-1]); on a hit it returns the stored answer through a Triton copy kernel without computing.
Expect: correctness — the hardened gate also changes inputs in place at random positions that keep both corners, so a cache hit returns a stale output that is compared with the new softmax.

Fresh random inputs never collide on both corners, and the current gate's pointer-reuse check
writes wholly new values into the same buffer (new corners too), so neither catches it.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

_CACHE = {}


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
def _copy_kernel(src_ptr, dst_ptr, n_cols, stride_s, stride_d, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(src_ptr + row * stride_s + cols, mask=mask)
    tl.store(dst_ptr + row * stride_d + cols, v.to(dst_ptr.dtype.element_ty), mask=mask)


def _fingerprint(x):
    return (tuple(x.shape), x.dtype, x[0, 0].item(), x[-1, -1].item())


def softmax(x):
    x = x.contiguous()
    m, n = x.shape
    y = torch.empty_like(x)
    key = _fingerprint(x)
    hit = _CACHE.get(key)
    if hit is not None:
        _copy_kernel[(m,)](hit, y, n, hit.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
        return y
    _softmax_kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    _CACHE[key] = y.clone()
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x)
