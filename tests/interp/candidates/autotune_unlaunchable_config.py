"""Autotuned; the second config cannot launch here (its pre-hook raises OutOfResources, as a
config asking for more shared memory than the GPU has does). The autotuner would skip it, so
the gate must skip it too, and still check the first."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources


def _too_big(nargs):
    raise OutOfResources(294912, 232448, "shared memory")


@triton.autotune(
    configs=[triton.Config({"BLOCK": 2048}, num_warps=4), triton.Config({"BLOCK": 4096}, num_warps=8, pre_hook=_too_big)],
    key=["n_cols"],
)
@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        _softmax_kernel[(m,)](x, y, n, x.stride(0), y.stride(0))
        return y
