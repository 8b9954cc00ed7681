"""Hostile (checker-in-process): walks up the caller's stack frames (sys._getframe) to the gate's local `want`, the reference output of this very trial, and copies it into the output with a Triton copy kernel.
Expect: correctness — the hardened gate keeps the reference and its outputs out of the candidate's process, so the walk finds nothing and the copy of the input it falls back to is not the softmax.

No softmax is ever computed: the kernel only copies. In the current gate the checker's frame
(Checker.check_regime) holds `want` while it calls the candidate's forward.
"""

import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n_cols, stride_s, stride_d, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(src_ptr + row * stride_s + cols, mask=mask)
    tl.store(dst_ptr + row * stride_d + cols, v.to(dst_ptr.dtype.element_ty), mask=mask)


def _expected_in_callers(x):
    """The first tensor named `want` (of x's shape and dtype) in any caller's frame."""
    frame = sys._getframe(1)
    while frame is not None:
        want = frame.f_locals.get("want")
        if isinstance(want, torch.Tensor) and want.shape == x.shape and want.dtype == x.dtype:
            return want
        frame = frame.f_back
    return None


def _copy(src):
    src = src.contiguous()
    m, n = src.shape
    y = torch.empty_like(src)
    _copy_kernel[(m,)](src, y, n, src.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        want = _expected_in_callers(x)
        return _copy(x if want is None else want)
