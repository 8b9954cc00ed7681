"""Hostile (checker-in-process): at import, replaces klineage.gate.compare.compare_outputs with a function that always reports a match, then returns a Triton copy of its input.
Expect: correctness — no klineage code is importable in the hardened gate's sandbox (the patch is skipped) and the comparison runs elsewhere, so the input copy is compared with the true softmax.

The output changes with the input, so the gate's "output unchanged although the inputs
changed" check (which uses tensors_equal, left alone) does not fire.
"""

import importlib
import importlib.util

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


def _patch_comparison():
    if importlib.util.find_spec("klineage") is None:
        return
    cmp = importlib.import_module("klineage.gate.compare")
    verdict = cmp.Comparison(True)
    cmp.compare_outputs = lambda got, want, tol_for: verdict
    cmp.compare_tensor = lambda got, want, tol, label: verdict


_patch_comparison()


def _copy(src):
    src = src.contiguous()
    m, n = src.shape
    y = torch.empty_like(src)
    _copy_kernel[(m,)](src, y, n, src.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return _copy(x)
