"""Child-side instrumentation: what ran inside the candidate's forward.

- ForwardMonitor (a TorchDispatchMode) records every aten op the forward executes outside
  Triton launches, and fills fresh allocations (torch.empty & co.) with NaN so an output element
  no kernel wrote fails the comparison.
- Launch hooks count Triton kernel launches and pause the monitor while a kernel runs (the
  interpreter moves tensors with aten ops of its own).
- Autotune forcing runs one given config of every @triton.autotune kernel: on the CPU the
  autotuner cannot benchmark, and on any device it may pick any config, so each is checked.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten ops (overload packets) a forward may run outside Triton: allocation, views and
# reshapes, copies for contiguity and dtype casts, scalar reads. Any other op is compute.
ALLOWED_ATEN_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "new_zeros",
        "ones",
        "ones_like",
        "new_ones",
        "full",
        "full_like",
        "new_full",
        "fill_",
        "zero_",
        "arange",
        "scalar_tensor",
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "as_strided",
        "expand",
        "permute",
        "transpose",
        "t",
        "squeeze",
        "unsqueeze",
        "select",
        "slice",
        "narrow",
        "split",
        "split_with_sizes",
        "unbind",
        "chunk",
        "alias",
        "detach",
        "flatten",
        "unflatten",
        "movedim",
        "view_as_real",
        "view_as_complex",
        "lift_fresh",
        "lift_fresh_copy",
        "clone",
        "contiguous",
        "copy_",
        "_to_copy",
        "to",
        "_local_scalar_dense",
        "is_same_size",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "resize_",
        "set_",
        "_has_compatible_shallow_copy_type",
        "record_stream",
    }
)
_ALLOCATING_OPS = frozenset(
    {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
)
INT_POISON = -0x5EED  # an unlikely value for index-like outputs left unwritten


def poison_(t: torch.Tensor) -> None:
    if t.is_floating_point() or t.is_complex():
        t.fill_(math.nan)
    elif t.dtype != torch.bool:
        t.fill_(INT_POISON)


@dataclass
class RunState:
    """What the instrumentation saw; reset per forward by the worker."""

    launches: int = 0
    kernels: set[str] = field(default_factory=set)  # names of the kernels launched
    in_triton: int = 0
    in_candidate: bool = False
    reference_calls: int = 0
    force_config: int | None = None
    # id(autotuner) -> number of configs it may pick from
    autotuners: dict[int, int] = field(default_factory=dict)
    autotuner_names: dict[int, str] = field(default_factory=dict)
    forced: dict[str, str] = field(default_factory=dict)

    @property
    def config_passes(self) -> int:
        return max(self.autotuners.values(), default=1)


STATE = RunState()


class ForwardMonitor(TorchDispatchMode):
    def __init__(self, poison: bool = True) -> None:
        super().__init__()
        self.poison = poison
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if STATE.in_triton:
            return out
        name = func.overloadpacket.__name__
        self.ops[name] += 1
        if self.poison and name in _ALLOCATING_OPS and isinstance(out, torch.Tensor):
            poison_(out)
        return out

    def forbidden_ops(self) -> dict[str, int]:
        return {op: n for op, n in self.ops.items() if op not in ALLOWED_ATEN_OPS}


def _wrap_launch(cls: Any) -> None:
    if getattr(cls.run, "_klineage_hooked", False):
        return
    original = cls.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("warmup"):
            return original(self, *args, **kwargs)
        STATE.launches += 1
        fn = getattr(self, "fn", None)
        STATE.kernels.add(str(getattr(fn, "__name__", None) or getattr(self, "__name__", "?")))
        STATE.in_triton += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            STATE.in_triton -= 1

    run._klineage_hooked = True  # type: ignore[attr-defined]
    cls.run = run  # type: ignore[method-assign]


def _describe(config: Any) -> str:
    parts = [f"{k}={v}" for k, v in getattr(config, "kwargs", {}).items()]
    for attr in ("num_warps", "num_stages"):
        if getattr(config, attr, None) is not None:
            parts.append(f"{attr}={getattr(config, attr)}")
    return ", ".join(parts)


def _wrap_autotuner(cls: Any) -> None:
    if getattr(cls.run, "_klineage_hooked", False):
        return
    original = cls.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        configs = list(self.configs)
        if getattr(self, "early_config_prune", None) or getattr(self, "perf_model", None):
            # Honour the kernel's own pruning: a pruned config is never picked on a GPU.
            self.nargs = dict(zip(self.arg_names, args, strict=False))
            configs = list(self.prune_configs(kwargs))
        name = getattr(getattr(self, "base_fn", None), "__name__", "kernel")
        STATE.autotuners[id(self)] = len(configs)
        STATE.autotuner_names[id(self)] = name
        if STATE.force_config is None:
            return original(self, *args, **kwargs)
        chosen = configs[min(STATE.force_config, len(configs) - 1)]
        STATE.forced[name] = _describe(chosen)
        saved = self.configs
        self.configs = [chosen]
        try:
            return original(self, *args, **kwargs)
        finally:
            self.configs = saved

    run._klineage_hooked = True  # type: ignore[attr-defined]
    cls.run = run  # type: ignore[method-assign]


def install_hooks(reference_cls: Any) -> None:
    """Patch Triton's launch paths and the reference's forward, once per process."""
    from triton.runtime import autotuner, jit

    _wrap_launch(jit.JITFunction)
    try:
        from triton.runtime import interpreter

        _wrap_launch(interpreter.InterpretedFunction)
    except ImportError:  # pragma: no cover - every supported Triton has the interpreter
        pass
    _wrap_autotuner(autotuner.Autotuner)

    original_forward = reference_cls.forward
    if getattr(original_forward, "_klineage_hooked", False):
        return

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if STATE.in_candidate:
            STATE.reference_calls += 1
        return original_forward(self, *args, **kwargs)

    forward._klineage_hooked = True  # type: ignore[attr-defined]
    reference_cls.forward = forward  # type: ignore[method-assign]


@dataclass
class ForwardRecord:
    """One observed candidate forward."""

    output: Any
    launches: int
    forbidden_ops: dict[str, int]
    reference_calls: int
    kernels: list[str] = field(default_factory=list)


@contextmanager
def observed_forward(poison: bool = True) -> Iterator[ForwardMonitor]:
    STATE.launches = 0
    STATE.kernels = set()
    STATE.reference_calls = 0
    STATE.in_candidate = True
    monitor = ForwardMonitor(poison=poison)
    try:
        with monitor:
            yield monitor
    finally:
        STATE.in_candidate = False


def run_observed(model: Any, inputs: list[Any], poison: bool = True) -> ForwardRecord:
    with torch.no_grad(), observed_forward(poison) as monitor:
        out = model(*inputs)
    return ForwardRecord(
        out, STATE.launches, monitor.forbidden_ops(), STATE.reference_calls, sorted(STATE.kernels)
    )


def runtime_violations(record: ForwardRecord) -> list[str]:
    """Rationales: the work must be done by Triton kernels, not by PyTorch or the reference."""
    found = []
    if record.launches == 0:
        found.append("no Triton kernel was launched during forward")
    if record.forbidden_ops:
        ops = ", ".join(f"aten.{op} x{n}" for op, n in sorted(record.forbidden_ops.items()))
        found.append(
            f"PyTorch computed in forward (only allocation, views and casts are allowed): {ops}"
        )
    if record.reference_calls:
        found.append(
            f"the reference Model.forward was called {record.reference_calls} time(s) from ModelNew"
        )
    return found
