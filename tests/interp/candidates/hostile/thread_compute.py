"""Hostile (monitor-blind-spot): launches a token Triton copy kernel, then computes torch.softmax into the output on a second thread (threading.Thread), where the gate's thread-local dispatch monitor is not active.
Expect: runtime_guards — the hardened gate monitors torch ops in every thread of the candidate's process, so aten._softmax on the worker thread is seen and rejected.
"""

import threading

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n_cols, stride_s, stride_d, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(src_ptr + row * stride_s + cols, mask=mask)
    tl.store(dst_ptr + row * stride_d + cols, v.to(dst_ptr.dtype.element_ty), mask=mask)


def _copy(src):
    src = src.contiguous()
    m, n = src.shape
    y = torch.empty_like(src)
    _copy_kernel[(m,)](src, y, n, src.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


def _softmax_on_thread(x, y):
    def work():
        y.copy_(torch.softmax(x.float(), dim=-1).to(y.dtype))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        return _softmax_on_thread(x, _copy(x))
