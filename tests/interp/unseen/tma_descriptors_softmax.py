"""Unseen TMA dispatch for tma_descriptors (problem: examples/softmax/problem.py).

Unlike the corpus matmul: a row softmax, `lang` alias, an inverted guard (the pointer kernel
under the `if`, the TMA path under the `else`) and the TMA kernel launched through a helper
function. On the CPU (interpreter) the guard always picks the pointer kernel.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as lang
from triton.language import constexpr  # bare: the 3.9 interpreter misreads `lang.constexpr`


@triton.jit
def row_softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK_N: constexpr):
    row = lang.program_id(0).to(lang.int64)
    cols = lang.arange(0, BLOCK_N)
    ok = cols < n_cols
    x = lang.load(x_ptr + row * stride_x + cols, mask=ok, other=float("-inf")).to(lang.float32)
    e = lang.exp(x - lang.max(x, 0))
    lang.store(
        y_ptr + row * stride_y + cols, (e / lang.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=ok
    )


@triton.jit
def row_softmax_tma(x_ptr, y_ptr, n_rows, n_cols, BLOCK_N: constexpr):
    row = lang.program_id(0)
    xd = lang.make_tensor_descriptor(
        x_ptr, shape=[n_rows, n_cols], strides=[n_cols, 1], block_shape=[1, BLOCK_N]
    )
    yd = lang.make_tensor_descriptor(
        y_ptr, shape=[n_rows, n_cols], strides=[n_cols, 1], block_shape=[1, BLOCK_N]
    )
    cols = lang.arange(0, BLOCK_N)
    x = xd.load([row, 0]).to(lang.float32)
    x = lang.where(cols[None, :] < n_cols, x, float("-inf"))
    e = lang.exp(x - lang.max(x, 1)[:, None])
    yd.store([row, 0], (e / lang.sum(e, 1)[:, None]).to(y_ptr.dtype.element_ty))


def _pointer_only(x):
    if os.environ.get("TRITON_INTERPRET", "0") == "1" or x.device.type != "cuda":
        return True
    if not hasattr(lang, "make_tensor_descriptor") or not hasattr(triton, "set_allocator"):
        return True
    if torch.cuda.get_device_capability(x.device)[0] < 9:
        return True
    n = x.shape[1]
    # A TMA box is at most 256 elements a side; rows must be 16-byte aligned.
    return triton.next_power_of_2(n) > 256 or (n * x.element_size()) % 16 != 0


def _launch_tma(x, y, block):
    def scratch(size, alignment, stream):
        return torch.empty(size, device=x.device, dtype=torch.int8)

    triton.set_allocator(scratch)
    row_softmax_tma[(x.shape[0],)](x, y, x.shape[0], x.shape[1], BLOCK_N=block)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        block = triton.next_power_of_2(x.shape[1])
        if _pointer_only(x):
            row_softmax[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK_N=block)
        else:
            _launch_tma(x, y, block)
        return y
