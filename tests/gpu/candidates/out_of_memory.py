"""Adversarial (GPU): asks for 64 TB of device memory."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        huge = torch.empty(1 << 46, dtype=torch.uint8, device=x.device)
        _copy_kernel[(1,)](x, huge, 1, BLOCK=16)
        return x
