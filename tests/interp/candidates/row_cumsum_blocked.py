"""A correct row cumsum in another order than PyTorch's: one program per row scans it in blocks,
each block's local scan added to a float32 carry of the blocks before it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_cumsum(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = tl.zeros((1,), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        c = c0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * cols + c, mask=c < cols, other=0.0)
        tl.store(out_ptr + row * cols + c, carry + tl.cumsum(x, axis=0), mask=c < cols)
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty_like(x)
        _row_cumsum[(rows,)](x, out, cols, BLOCK=1024)
        return out
