"""Hostile (inputs-beyond-get_inputs): for tests/interp/problems/hostile/relu_rand.py (ReLU on torch.rand inputs, all in [0, 1)), a Triton kernel that only copies its input: identical to relu on every input get_inputs can produce.
Expect: correctness — the hardened gate draws signed inputs beyond get_inputs (e.g. randn), where the copy keeps the negatives relu must zero.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)  # "relu"


def relu(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    _relu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
