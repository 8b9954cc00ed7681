"""Hostile (problem-fault): companion of tests/interp/problems/hostile/nan_reference.py: launches a Triton kernel that stores nothing and returns its never-written (NaN-poisoned) output, which a checker that counts matching NaNs as equal accepts against an all-NaN reference.
Expect: correctness — on the real softmax problem the unwritten output fails; against nan_reference.py the hardened gate must refuse the problem itself (problem error, exit 2) before judging any candidate.
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
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    tl.static_assert(BLOCK > 0)  # loads, computes nothing, stores nothing


def softmax(x):
    x = x.contiguous()
    m, n = x.shape
    y = torch.empty_like(x)
    _softmax_kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x)
