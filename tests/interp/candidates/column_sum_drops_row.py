"""column_sum_blocked.py with an off-by-one: the last row is masked out, one term of every
column sum dropped."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _column_sum(x_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for r0 in range(0, rows, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        mask = (r[:, None] < rows - 1) & (c[None, :] < cols)
        acc += tl.load(x_ptr + r[:, None] * cols + c[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + c, tl.sum(acc, axis=0), mask=c < cols)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(cols, device=x.device, dtype=x.dtype)
        block_c = min(triton.next_power_of_2(cols), 64)
        grid = (triton.cdiv(cols, block_c),)
        _column_sum[grid](x, out, rows, cols, BLOCK_R=256, BLOCK_C=block_c)
        return out
