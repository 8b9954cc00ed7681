"""Hostile (checker-in-process): at import, monkeypatches torch.softmax (and F.softmax, Tensor.softmax) into an identity, so the reference computes the same input copy that its Triton kernel returns.
Expect: correctness — the hardened gate computes the reference in another process, where torch is unpatched, so the input copy is compared with the true softmax.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n_cols, stride_s, stride_d, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(src_ptr + row * stride_s + cols, mask=mask)
    tl.store(dst_ptr + row * stride_d + cols, v.to(dst_ptr.dtype.element_ty), mask=mask)


def _fake_softmax(x, dim=None, *args, **kwargs):
    return x.clone()


def _fake_method(self, dim=None, *args, **kwargs):
    return self.clone()


torch.softmax = _fake_softmax
F.softmax = _fake_softmax
torch.Tensor.softmax = _fake_method


def _copy(src):
    src = src.contiguous()
    m, n = src.shape
    y = torch.empty_like(src)
    _copy_kernel[(m,)](src, y, n, src.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return _copy(x)
