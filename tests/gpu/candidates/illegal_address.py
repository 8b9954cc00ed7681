"""Adversarial (GPU): stores far outside its output, an illegal memory access."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bad_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs + (1 << 40), x, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _bad_kernel[(1,)](x, y, x.numel(), BLOCK=1024)
        return y
