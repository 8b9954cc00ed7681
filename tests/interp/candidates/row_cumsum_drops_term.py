"""row_cumsum_blocked.py with an off-by-one in the load mask: the last element of each row is
read as 0, one term of its last prefix sum dropped."""

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
        x = tl.load(x_ptr + row * cols + c, mask=c < cols - 1, other=0.0)
        tl.store(out_ptr + row * cols + c, carry + tl.cumsum(x, axis=0), mask=c < cols)
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty_like(x)
        _row_cumsum[(rows,)](x, out, cols, BLOCK=1024)
        return out
