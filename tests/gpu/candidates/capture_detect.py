"""Adversarial (GPU): computes with Triton when called eagerly, but returns the previous call's
output while a CUDA graph is being captured, so a timed graph replay does no work at all. The
gate's graph replay compares replayed outputs and must reject it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


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
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, x):
        if torch.cuda.is_current_stream_capturing() and self.last is not None:
            return self.last
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        _softmax_kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
        self.last = y
        return y
