"""Hostile (checker-in-process): at import, finds the problem module in sys.modules and replaces the reference Model.forward with an identity, so the reference "computes" the same input copy that its Triton kernel returns.
Expect: correctness — the hardened gate runs the reference outside the candidate's process, so the patch changes nothing there and the input copy is compared with the true softmax.

Nothing in the text names `Model` (the static guard looks for the name): the class is read
from the module's dict by a string key.
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


def _identity_forward(self, x, *args, **kwargs):
    return x.clone()


def _patch_reference():
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict) or "get_inputs" not in d:
            continue
        ref = d.get("Model")
        if isinstance(ref, type) and issubclass(ref, nn.Module):
            ref.forward = _identity_forward


_patch_reference()


def _copy(src):
    src = src.contiguous()
    m, n = src.shape
    y = torch.empty_like(src)
    _copy_kernel[(m,)](src, y, n, src.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return _copy(x)
