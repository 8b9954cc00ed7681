"""Hostile (monitor-blind-spot): returns its (NaN-poisoned, never written) output viewed as a torch.Tensor subclass whose __torch_function__ fills it with torch.softmax of a private copy of the input on the first torch call the gate makes on it (.shape, ==, .to), after the forward's monitor is gone.
Expect: runtime_guards — the hardened gate accepts only a plain torch.Tensor as output (or reads it under the monitor), so an output that computes when read is rejected.
"""

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


class _Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            src = getattr(a, "_src", None) if isinstance(a, _Lazy) else None
            if src is not None:
                a._src = None
                with torch._C.DisableTorchFunctionSubclass():
                    a.copy_(torch.softmax(src.float(), dim=-1).to(a.dtype))
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


def _lazy_output(x):
    src = _copy(x)  # the only Triton work: a private snapshot of the input
    out = torch.empty_like(src).as_subclass(_Lazy)
    out._src = src
    return out


class ModelNew(nn.Module):
    def forward(self, x):
        return _lazy_output(x)
