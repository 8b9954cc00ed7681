"""What the candidate's harness (gate/harness.py) watches a forward with: the dispatch and
function modes, the audit hook, thread and fork guards, and the Triton launch and autotune hooks.

Like the harness, this module imports nothing from klineage: it is copied beside the harness
script into the sandbox (gate/session.py) and imported there as a plain sibling module. What it
records (STATE) are claims from the candidate's process; the parent trusts none of them for
correctness.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import traceback
from collections import Counter
from typing import Any

# -- what a forward may do outside Triton kernels -------------------------------------------------

# aten ops (overload packets) a forward may run outside Triton: allocation, views and reshapes,
# copies for contiguity and dtype casts, scalar reads. Any other op is compute.
ALLOWED_ATEN_OPS = frozenset(
    [
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
    ]
)
ALLOCATING_OPS = frozenset(
    ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided")
)
# Tensor methods that hand tensor memory to the host (numpy, Python lists, raw pointers): work
# done on it is invisible to the dispatcher. data_ptr is not here: launchers check alignment
# with it (kernels/matmul/expert.py), and writing through a raw pointer needs ctypes, which the
# static guards and the audit hook catch.
HOST_MEMORY_METHODS = frozenset(
    ("numpy", "tolist", "__array__", "__dlpack__", "untyped_storage", "storage")
)
# Audit events that a forward has no business raising. File operations are not here: lazy imports
# inside torch make temporary files on a first call, and the sandbox is what keeps files safe.
FORBIDDEN_AUDIT_PREFIXES = (
    "os.fork",
    "os.forkpty",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.kill",
    "os.killpg",
    "subprocess.Popen",
    "socket.",
    "ctypes.",
    "sqlite3.",
)
# Loading a shared library is not compute: torch and Triton do it lazily on a first GPU call
# (torch.cuda.get_device_properties looked up libraries so, on the H200). Calling into one
# (ctypes.call_function), or reading and writing memory through ctypes, still is.
ALLOWED_AUDIT_EVENTS = frozenset(("ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle"))
# Scalar reads and writes a launcher needs are few (a size, a flag); thousands of them per
# forward are a host loop over the elements.
ELEMENTWISE_HOST_OPS = frozenset(
    ("_local_scalar_dense", "fill_", "copy_", "select", "scalar_tensor")
)
MAX_HOST_ELEMENT_OPS = 256
INT_POISON = -0x5EED  # an unlikely value for index-like outputs left unwritten
FORK_CHILD_EXIT = 70


class State:
    """What the instrumentation saw during the current forward."""

    def __init__(self) -> None:
        self.in_forward = False
        self.in_triton = 0
        self.launches = 0
        self.kernels: set[str] = set()
        self.violations: list[str] = []
        # an int: every autotuner's config at that index; "mix:R": configs chosen apart; a
        # dict: each named kernel's own row (the profile sweep's rows chosen apart)
        self.force_config: int | str | dict[str, int] | None = None
        self.mix_rank: dict[str, int] = {}  # autotuned kernel -> order first seen (mixes)
        self.autotuners: dict[str, int] = {}  # kernel name -> configs it may pick from
        self.forced: dict[str, str] = {}
        self.picked: dict[str, str] = {}  # kernel name -> the config its autotuner chose
        self.harness_threads: set[int] = set()
        self.closing = False

    def reset(self) -> None:
        self.launches = 0
        self.kernels = set()
        self.violations = []
        self.forced = {}

    def violation(self, text: str) -> None:
        if text not in self.violations:
            self.violations.append(text)


STATE = State()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if (
        STATE.in_forward
        and not STATE.in_triton
        and event.startswith(FORBIDDEN_AUDIT_PREFIXES)
        and event not in ALLOWED_AUDIT_EVENTS
    ):
        STATE.violation(f"{event} during forward (only Triton kernels may compute)")
        if os.environ.get("KL_DEBUG_AUDIT"):
            traceback.print_stack()


def install_process_guards() -> None:
    # An audit hook cannot be removed once added.
    sys.addaudithook(_audit)
    # A forked child could compute into shared memory, out of every monitor's sight: it exits
    # before it returns from fork.
    os.register_at_fork(after_in_child=lambda: os._exit(FORK_CHILD_EXIT))
    original_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if STATE.in_forward:
            STATE.violation("a thread was started during forward (monitoring is per thread)")
            raise RuntimeError("threads may not be started inside forward")
        original_start(self)

    threading.Thread.start = start  # type: ignore[method-assign]
    import _thread

    original_new = _thread.start_new_thread

    def start_new_thread(*a: Any, **k: Any) -> Any:
        if STATE.in_forward:
            STATE.violation("a thread was started during forward (monitoring is per thread)")
            raise RuntimeError("threads may not be started inside forward")
        return original_new(*a, **k)

    _thread.start_new_thread = start_new_thread
    STATE.harness_threads = {t.ident or 0 for t in threading.enumerate()}


def make_monitors() -> tuple[Any, Any]:
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    def poison(t: Any) -> None:
        if t.is_floating_point() or t.is_complex():
            t.fill_(math.nan)
        elif t.dtype != torch.bool:
            t.fill_(INT_POISON)

    class DispatchMonitor(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: Counter[str] = Counter()

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            if STATE.in_triton:
                return out
            namespace = getattr(func, "namespace", "aten")
            name = func.overloadpacket.__name__
            qualified = name if namespace == "aten" else f"{namespace}::{name}"
            self.ops[qualified] += 1
            if name in ALLOCATING_OPS and namespace == "aten" and isinstance(out, torch.Tensor):
                poison(out)
            return out

        def forbidden(self) -> dict[str, int]:
            """Compute ops, and allowed ops used so often that they are the computation: a
            forward that reads every element with item() and writes it back with setitem
            computes on the host in Python."""
            return {
                op: n
                for op, n in self.ops.items()
                if op not in ALLOWED_ATEN_OPS
                or (op in ELEMENTWISE_HOST_OPS and n > MAX_HOST_ELEMENT_OPS)
            }

    class FunctionMonitor(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            if not STATE.in_triton:
                name = getattr(func, "__name__", "")
                if name in HOST_MEMORY_METHODS:
                    STATE.violation(
                        f"Tensor.{name}() in forward (hands tensor memory to host code)"
                    )
                for t in types:
                    if (
                        t is not torch.Tensor
                        and issubclass(t, torch.Tensor)
                        and t.__module__ != "torch.nn.parameter"
                    ):
                        STATE.violation(
                            f"a torch.Tensor subclass ({t.__name__}) took part in forward"
                        )
            return func(*args, **(kwargs or {}))

    return DispatchMonitor, FunctionMonitor


def _describe(config: Any) -> str:
    parts = [f"{k}={v}" for k, v in getattr(config, "kwargs", {}).items()]
    for attr in ("num_warps", "num_stages"):
        if getattr(config, attr, None) is not None:
            parts.append(f"{attr}={getattr(config, attr)}")
    return ", ".join(parts)


def _unpaused(fn: Any) -> Any:
    """A callable the candidate supplies to a launch (grid, hook) runs monitored."""

    def call(*a: Any, **k: Any) -> Any:
        depth = STATE.in_triton
        STATE.in_triton = 0
        try:
            return fn(*a, **k)
        finally:
            STATE.in_triton = depth

    return call


def _wrap_launch(cls: Any) -> None:
    original = cls.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("warmup"):
            return original(self, *args, **kwargs)
        STATE.launches += 1
        fn = getattr(self, "fn", None)
        STATE.kernels.add(str(getattr(fn, "__name__", None) or getattr(self, "__name__", "?")))
        if callable(kwargs.get("grid")):
            kwargs["grid"] = _unpaused(kwargs["grid"])
        hooks = getattr(self, "pre_run_hooks", None)
        saved = None
        if hooks:
            saved = list(hooks)
            hooks[:] = [_unpaused(h) for h in saved]
        STATE.in_triton += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            STATE.in_triton -= 1
            if hooks and saved is not None:
                hooks[:] = saved

    cls.run = run


def table_row(c: int, rows: int) -> int:
    """The row of a table of `rows` configs that the gate's config c makes it take: row c, or
    its last row when it is shorter (a file's tables are swept together; tunables.fold cuts
    each table by the same rule)."""
    return min(c, rows - 1)


def _forced_index(force: int | str | dict[str, int], name: str, n: int) -> int:
    """The config an autotuner is made to take: the index `force` for every kernel, or for
    "mix:R" the k-th autotuned kernel this process saw takes (R + k) mod n, so the kernels
    of one forward take different rows of their tables (each autotuner picks apart on a GPU;
    a file must be right under any combination, not only the diagonal), or for a dict the
    row it names for this kernel (its first where it names none)."""
    if isinstance(force, str):
        k = STATE.mix_rank.setdefault(name, len(STATE.mix_rank))
        return (int(force.partition(":")[2]) + k) % n
    return forced_row(force, name, n)


def forced_row(force: int | dict[str, int], name: str, n: int) -> int:
    """The row of kernel `name`'s table of n configs that an index (every table's row c) or
    each kernel's rows (its own; its first where unnamed) make it take (tunables.fold too)."""
    return table_row(int(force.get(name, 0)) if isinstance(force, dict) else force, n)


def _wrap_autotuner(cls: Any) -> None:
    original = cls.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        configs = list(self.configs)
        if getattr(self, "early_config_prune", None) or getattr(self, "perf_model", None):
            # Honour the kernel's own pruning: a pruned config is never picked on a GPU.
            self.nargs = dict(zip(self.arg_names, args, strict=False))
            configs = list(self.prune_configs(kwargs))
        name = str(getattr(getattr(self, "base_fn", None), "__name__", "kernel"))
        STATE.autotuners[name] = max(STATE.autotuners.get(name, 0), len(configs))
        if STATE.force_config is None:
            out = original(self, *args, **kwargs)
            best = getattr(self, "best_config", None)
            if best is not None:
                STATE.picked[name] = _describe(best)
            return out
        chosen = configs[_forced_index(STATE.force_config, name, len(configs))]
        STATE.forced[name] = _describe(chosen)
        saved = self.configs
        self.configs = [chosen]
        try:
            return original(self, *args, **kwargs)
        finally:
            self.configs = saved

    cls.run = run


def install_mode_guards() -> None:
    """A forward may not pop the monitors off the dispatch stack (what
    torch.utils._python_dispatch._disable_current_modes does): those calls record a violation."""
    import torch
    import torch.utils._python_dispatch as python_dispatch

    def guarded(fn: Any, name: str) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            if STATE.in_forward and not STATE.in_triton and not STATE.closing:
                STATE.violation(f"{name} during forward (switches off the monitor)")
            return fn(*a, **k)

        return call

    for module, name in (
        (python_dispatch, "_pop_mode"),
        (python_dispatch, "_disable_current_modes"),
        (torch._C, "_pop_torch_dispatch_stack"),
        (torch._C, "_pop_torch_function_stack"),
        (torch._C, "_DisableTorchDispatch"),
    ):
        if hasattr(module, name):
            setattr(module, name, guarded(getattr(module, name), name))


def install_triton_hooks() -> None:
    from triton.runtime import autotuner, jit

    _wrap_launch(jit.JITFunction)
    try:
        from triton.runtime import interpreter

        _wrap_launch(interpreter.InterpretedFunction)
    except ImportError:  # pragma: no cover - every supported Triton has the interpreter
        pass
    _wrap_autotuner(autotuner.Autotuner)
