"""Keep the reference's float64 evaluation in float64: casts to a lower floating dtype are undone.

A reference Model written for half inputs upcasts them itself (`x.float()`, `.to(torch.float32)`,
`torch.cumsum(x, dtype=torch.float32)`) and casts back at the end (`.to(x.dtype)`). Given float64
inputs (gate/reference.py, `_Float64`), the first cast went down to float32, the Model computed
in float32 and the last cast went back up: the "float64 evaluation" was PyTorch's float32 result
again, PyTorch's own error against it read 0, and a correct reverse cumsum over 12000 float32
columns in another summation order was rejected on the H200 (2026-12-02, docs/benchmarks.md).

Inside `Float64Casts`, every floating dtype below float64 named by a call (a `dtype=` argument, a
dtype given to `Tensor.to` or `Tensor.type`) becomes float64, and `Tensor.float()`, `.half()`
and `.bfloat16()` of a float64 tensor return it as it is. Integer, boolean and complex dtypes are
left alone. What a Model computes is unchanged but for rounding: casts between floating dtypes
only round. It runs in the reference's own process, never the candidate's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_LOWER = (torch.float32, torch.float16, torch.bfloat16)
_SELF_CASTS = (torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16)
_DTYPE_ARGS = (torch.Tensor.to, torch.Tensor.type)


def _up(v: Any) -> Any:
    return torch.float64 if isinstance(v, torch.dtype) and v in _LOWER else v


class Float64Casts(TorchFunctionMode):
    """Within it, no cast leaves float64 for a lower floating dtype (the module docstring)."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func in _SELF_CASTS and args and isinstance(args[0], torch.Tensor):
            if args[0].dtype == torch.float64:
                return args[0]
        elif func in _DTYPE_ARGS:
            args = tuple(_up(a) for a in args)
        if "dtype" in kwargs:
            kwargs["dtype"] = _up(kwargs["dtype"])
        return func(*args, **kwargs)
