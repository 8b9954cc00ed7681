"""The candidate's side of the gate: a standalone script, run isolated, that holds only the
candidate module, torch and triton.

This file imports nothing from klineage, on purpose: it is copied into the sandbox and run as a
plain script, so the candidate's process holds no reference model, no expected output, no
comparison and no klineage module that it could read, patch or detect. The parent
(gate/session.py) sends commands as JSON lines on one file descriptor and reads replies on
another; every output the candidate computes is written to a file as tensors, and the parent
compares it with the reference, which ran in another process.

What runs here is instrumentation that reports what the forward did (aten ops outside Triton
launches, host reads of tensor memory, threads, forks, ctypes, sockets, custom ops, tensor
subclasses). Its reports are claims from a process the candidate controls: they catch the
candidate that does not know about them, and the parent trusts none of them for correctness.

Run as: python harness.py CMD_FD REPLY_FD
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
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
        self.force_config: int | None = None
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
DEVTIME: Any = None  # gate/devtime.py, imported by main() from beside this script


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


def _install_process_guards() -> None:
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


def _make_monitors() -> tuple[Any, Any]:
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
                op: n for op, n in self.ops.items()
                if op not in ALLOWED_ATEN_OPS or (op in ELEMENTWISE_HOST_OPS and n > MAX_HOST_ELEMENT_OPS)
            }  # fmt: skip

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
        chosen = configs[min(STATE.force_config, len(configs) - 1)]
        STATE.forced[name] = _describe(chosen)
        saved = self.configs
        self.configs = [chosen]
        try:
            return original(self, *args, **kwargs)
        finally:
            self.configs = saved

    cls.run = run


def _install_mode_guards() -> None:
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

    for module, name in ((python_dispatch, "_pop_mode"), (python_dispatch, "_disable_current_modes"),
                         (torch._C, "_pop_torch_dispatch_stack"), (torch._C, "_pop_torch_function_stack"),
                         (torch._C, "_DisableTorchDispatch")):  # fmt: skip
        if hasattr(module, name):
            setattr(module, name, guarded(getattr(module, name), name))


def _install_triton_hooks() -> None:
    from triton.runtime import autotuner, jit

    _wrap_launch(jit.JITFunction)
    try:
        from triton.runtime import interpreter

        _wrap_launch(interpreter.InterpretedFunction)
    except ImportError:  # pragma: no cover - every supported Triton has the interpreter
        pass
    _wrap_autotuner(autotuner.Autotuner)


# -- errors ---------------------------------------------------------------------------------------

AUTOTUNER_SKIPPED_ERRORS = ("OutOfResources", "CompileTimeAssertionFailure", "PTXASError")


def short_error(e: BaseException, limit: int = 25) -> str:
    """Type and message; long compiler errors keep their last lines, where the cause is."""
    text = f"{type(e).__name__}: {e}".strip()
    lines = text.splitlines()
    if len(lines) > limit:
        lines = [
            *lines[:3],
            f"... ({len(lines) - limit + 3} lines cut) ...",
            *lines[-(limit - 4) :],
        ]
    return "\n".join(lines)


def _line_in(path: str, exc: BaseException) -> tuple[int | None, str | None]:
    """The innermost line of `path` in the exception's traceback, following its causes: Triton's
    interpreter re-raises a kernel's error as InterpreterError from the original, whose
    traceback holds the kernel body's line."""
    line = text = None
    real = os.path.realpath(path)
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for frame in traceback.extract_tb(e.__traceback__):
            if os.path.realpath(frame.filename) == real:
                line, text = frame.lineno, frame.line
        e = e.__cause__ or e.__context__
    return line, text


# -- the session ----------------------------------------------------------------------------------


class Harness:
    def __init__(self, reply_fd: int) -> None:
        self.reply = os.fdopen(reply_fd, "w", encoding="utf-8", buffering=1)
        self.device = "cpu"
        self.seed = 0
        self.path = ""
        self.model_cls: Any = None
        self.models: dict[str, Any] = {}
        self.buffers: dict[str, list[Any]] = {}
        self.graphs: dict[str, Any] = {}
        self.timers: dict[str, Any] = {}
        self.input_sets: dict[str, list[Any]] = {}  # regime -> devtime input sets
        self.monitors: tuple[Any, Any] | None = None

    def send(self, obj: dict[str, Any]) -> None:
        self.reply.write(json.dumps(obj, default=str) + "\n")
        self.reply.flush()

    # load ---------------------------------------------------------------------------------
    def load(self, cmd: dict[str, Any]) -> dict[str, Any]:
        import importlib.util

        self.device = cmd["device"]
        self.seed = int(cmd["seed"])
        self.path = cmd["candidate"]
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        _install_triton_hooks()
        _install_mode_guards()
        self.monitors = _make_monitors()
        # A neutral module name: the file's own name could say "klineage" to a candidate that
        # looks for the gate in sys.modules.
        name = "candidate"
        spec = importlib.util.spec_from_file_location(name, self.path)
        if spec is None or spec.loader is None:
            return {"ok": False, "error": "cannot be imported", "line": None}
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, os.path.dirname(self.path))
        try:
            spec.loader.exec_module(module)
        except SystemExit as e:
            line, text = _line_in(self.path, e)
            return {"ok": False, "error": f"exits while being imported (SystemExit {e.code})",
                    "line": line, "source_line": text,
                    "expected": "a module that defines classes and functions without exiting"}  # fmt: skip
        except BaseException as e:
            line, text = _line_in(self.path, e)
            return {"ok": False, "error": f"{type(e).__name__} while importing: {e}",
                    "line": line, "source_line": text,
                    "expected": "a module that imports without error"}  # fmt: skip
        import inspect

        import torch.nn as nn

        cls = vars(module).get("ModelNew")
        if cls is None:
            defined = sorted(
                n for n, v in vars(module).items() if inspect.isclass(v) and v.__module__ == name
            )
            return {"ok": False, "error": f"no class ModelNew defined (classes here: {', '.join(defined) or 'none'})",
                    "line": None, "expected": "class ModelNew(nn.Module) at module level"}  # fmt: skip
        if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
            return {"ok": False, "error": f"ModelNew is {type(cls).__name__}, not an nn.Module subclass",
                    "line": None, "expected": "class ModelNew(nn.Module)"}  # fmt: skip
        self.model_cls = cls
        return {"ok": True}

    def model(self, regime: str, init_file: str) -> Any:
        if regime not in self.models:
            import torch

            init = torch.load(init_file, weights_only=True)["init"]
            torch.manual_seed(self.seed)  # as the reference was: parameters made in order match
            try:
                m = self.model_cls(*init)
            except TypeError as e:
                init_src = vars(self.model_cls).get("__init__", self.model_cls)
                try:
                    line = inspect_line(init_src)
                except Exception:
                    line = None
                raise CandidateInitError(
                    f"ModelNew(*get_init_inputs()) failed: {e}", line,
                    f"ModelNew.__init__ to accept the problem's init inputs ({len(init)} positional: "
                    f"{', '.join(type(v).__name__ for v in init) or 'none'})",
                ) from e  # fmt: skip
            self.models[regime] = m.to(self.device).eval()
        return self.models[regime]

    def inputs(self, cmd: dict[str, Any]) -> list[Any]:
        import torch

        values = list(torch.load(cmd["inputs"], weights_only=True)["inputs"])
        values = [v.to(self.device) if isinstance(v, torch.Tensor) else v for v in values]
        name = cmd.get("buffer")
        if not name:
            return values
        held = self.buffers.get(name)
        if held is None or len(held) != len(values):
            self.buffers[name] = values
            return values
        # The same tensors as the last call on this buffer, with new contents: a kernel that
        # caches by pointer or by a few values returns a stale result here.
        for i, (dst, src) in enumerate(zip(held, values, strict=True)):
            if (
                isinstance(dst, torch.Tensor)
                and isinstance(src, torch.Tensor)
                and dst.shape == src.shape
                and dst.dtype == src.dtype
            ):
                dst.copy_(src)
            else:
                held[i] = src
        return held

    def forward(self, model: Any, inputs: list[Any]) -> Any:
        import torch

        assert self.monitors is not None
        dispatch_cls, function_cls = self.monitors
        STATE.reset()
        alive = [t for t in threading.enumerate() if (t.ident or 0) not in STATE.harness_threads]
        if alive:
            STATE.violation(
                f"{len(alive)} thread(s) of the candidate alive during forward ({', '.join(t.name for t in alive[:3])})"
            )
        dispatch = dispatch_cls()
        STATE.in_forward = True
        try:
            with torch.no_grad(), function_cls(), dispatch:
                try:
                    out = model(*inputs)
                    if self.device == "cuda":
                        torch.cuda.synchronize()
                finally:
                    STATE.closing = True  # our own exit pops the monitors, legitimately
        finally:
            STATE.in_forward = STATE.closing = False
        forbidden = dispatch.forbidden()
        if forbidden:
            ops = ", ".join(
                f"aten.{op} x{n}" if "::" not in op else f"{op} x{n}"
                for op, n in sorted(forbidden.items())
            )
            STATE.violation(
                f"PyTorch computed in forward (only allocation, views and casts are allowed): {ops}"
            )
        if STATE.launches == 0:
            STATE.violation("no Triton kernel was launched during forward")
        return out

    def call(self, cmd: dict[str, Any]) -> dict[str, Any]:
        import torch

        reply: dict[str, Any] = {"id": cmd["id"]}
        try:
            model = self.model(cmd["regime"], cmd["init"])
        except CandidateInitError as e:
            return {
                **reply,
                "ok": False,
                "init_error": str(e),
                "line": e.line,
                "expected": e.expected,
            }
        use = self.inputs(cmd)
        before = [v.clone() if isinstance(v, torch.Tensor) else v for v in use]
        STATE.force_config = cmd.get("force_config")
        t0 = time.perf_counter()
        try:
            out = self.forward(model, use)
        except BaseException as e:
            skip = any(c.__name__ in AUTOTUNER_SKIPPED_ERRORS for c in type(e).__mro__)
            text = str(e)
            fatal = (
                "CUDA error" in text
                or "illegal memory access" in text
                or "device-side assert" in text
            )
            line, source_line = _line_in(self.path, e)
            return {**reply, "ok": False, "error": short_error(e), "skip": skip, "fatal": fatal,
                    "line": line, "source_line": source_line, "violations": list(STATE.violations),
                    "forced": dict(STATE.forced), "autotuners": dict(STATE.autotuners)}  # fmt: skip
        finally:
            STATE.force_config = None
        seconds = time.perf_counter() - t0
        outs = list(out) if isinstance(out, list | tuple) else [out]
        saved: list[Any] = []
        for k, o in enumerate(outs):
            if isinstance(o, torch.Tensor):
                if type(o) is not torch.Tensor:
                    # Not read: reading a lazy subclass would run its hidden compute.
                    STATE.violation(f"output {k} is a {type(o).__name__}, not a plain torch.Tensor")
                    saved.append(None)
                    continue
                saved.append(o.detach().to("cpu").clone())
            elif isinstance(o, bool | int | float):
                saved.append(o)
            else:
                STATE.violation(f"output {k} is {type(o).__name__}, expected tensors or numbers")
                saved.append(None)
        mutated = None
        for i, (a, b) in enumerate(zip(before, use, strict=True)):
            if isinstance(a, torch.Tensor) and not _bitwise_equal(a, b):
                mutated = i
                break
        torch.save({"outputs": saved, "tuple": isinstance(out, list | tuple)}, cmd["out"])
        return {**reply, "ok": True, "launches": STATE.launches, "kernels": sorted(STATE.kernels),
                "violations": list(STATE.violations), "autotuners": dict(STATE.autotuners),
                "forced": dict(STATE.forced), "mutated": mutated, "seconds": seconds}  # fmt: skip

    # GPU: graph replay check and timing -------------------------------------------------------
    def graph_check(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Capture forward in a CUDA graph on this regime's buffers, then for each input file:
        copy it into the captured buffers, replay, save the outputs. Host-side work (threads,
        caches, Python compute) does not survive replay: only the captured device work runs."""
        import torch

        regime = cmd["regime"]
        model = self.model(regime, cmd["init"])
        static = [v.to(self.device) if isinstance(v, torch.Tensor) else v
                  for v in torch.load(cmd["inputs"][0], weights_only=True)["inputs"]]  # fmt: skip
        with torch.no_grad():
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    model(*static)  # warm up: autotuners tune, kernels compile
            torch.cuda.current_stream().wait_stream(stream)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    out = model(*static)
            except Exception as e:
                return {
                    "id": cmd["id"],
                    "ok": False,
                    "capture_failed": True,
                    "error": short_error(e),
                }
        outs = list(out) if isinstance(out, list | tuple) else [out]
        files = []
        for path, dest in zip(cmd["inputs"][1:], cmd["outs"], strict=True):
            values = torch.load(path, weights_only=True)["inputs"]
            for dst, src in zip(static, values, strict=True):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src.to(self.device))
            graph.replay()
            torch.cuda.synchronize()
            torch.save({"outputs": [o.detach().to("cpu").clone() if isinstance(o, torch.Tensor) else o for o in outs],
                        "tuple": isinstance(out, list | tuple)}, dest)  # fmt: skip
            files.append(dest)
        self.graphs[regime] = (graph, static)
        return {"id": cmd["id"], "ok": True, "outs": files}

    def kernels(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """The device kernels one forward ran, by name (profiler, CUDA activity)."""
        import torch
        from torch.profiler import ProfilerActivity, profile

        model = self.model(cmd["regime"], cmd["init"])
        values = [v.to(self.device) if isinstance(v, torch.Tensor) else v
                  for v in torch.load(cmd["inputs"], weights_only=True)["inputs"]]  # fmt: skip
        with torch.no_grad():
            model(*values)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                model(*values)
                torch.cuda.synchronize()
        names = sorted(
            {
                e.name
                for e in prof.events()
                if getattr(e, "device_type", None) is not None
                and "cuda" in str(e.device_type).lower()
            }
        )
        return {
            "id": cmd["id"],
            "ok": True,
            "device_kernels": names,
            "launched": sorted(STATE.kernels),
        }

    def time(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """One round of timing on a regime (gate/devtime.py): device samples by graph replay,
        host samples by eager launches. The timer (input sets, captured graph) is built on the
        first round and kept, so later rounds are comparable. With force_config, every
        autotuned kernel runs that config of its table (the gate's config sweep); the input
        sets of a regime are shared by its configs, and a timer asked with keep=false is
        dropped after its samples (a sweep times each config once)."""
        import torch

        regime, force = cmd["regime"], cmd.get("force_config")
        key = regime if force is None else f"{regime}#{force}"
        STATE.force_config = force
        try:
            timer = self.timers.get(key)
            if timer is None:
                sets = self.input_sets.get(regime)
                if sets is None:
                    values = [v.to(self.device) if isinstance(v, torch.Tensor) else v
                              for v in torch.load(cmd["inputs"], weights_only=True)["inputs"]]  # fmt: skip
                    sets = self.input_sets[regime] = DEVTIME.input_sets(values, DEVTIME.l2_bytes())
                timer = DEVTIME.Timer(self.model(regime, cmd["init"]), sets[0], sets=sets)
                if cmd.get("keep", True):
                    self.timers[key] = timer
            n = int(cmd["samples"])
            device, host = timer.device_samples(n), timer.host_samples(n)
        finally:
            STATE.force_config = None
        return {"id": cmd["id"], "ok": True, "device": device, "host": host,
                "capture_error": timer.capture_error, "sets": timer.calls,
                "picked": dict(STATE.picked), "forced": dict(STATE.forced)}  # fmt: skip

    def dispatch(self, cmd: dict[str, Any]) -> dict[str, Any] | None:
        op = cmd.get("op")
        if op == "load":
            return {"id": cmd.get("id", 0), **self.load(cmd)}
        if op == "call":
            return self.call(cmd)
        if op == "graph_check":
            return self.graph_check(cmd)
        if op == "kernels":
            return self.kernels(cmd)
        if op == "time":
            return self.time(cmd)
        if op == "exit":
            return None
        return {"id": cmd.get("id", 0), "ok": False, "error": f"unknown op {op!r}"}


class CandidateInitError(Exception):
    def __init__(self, message: str, line: int | None, expected: str) -> None:
        super().__init__(message)
        self.line = line
        self.expected = expected


def inspect_line(obj: Any) -> int | None:
    import inspect

    return inspect.getsourcelines(obj)[1]


def _bitwise_equal(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python harness.py CMD_FD REPLY_FD", file=sys.stderr)
        return 2
    cmd_fd, reply_fd = int(argv[1]), int(argv[2])
    global DEVTIME
    # The timing module is copied beside this script (python -I leaves its folder off the path).
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import devtime as DEVTIME
    finally:
        sys.path.pop(0)
    _install_process_guards()
    harness = Harness(reply_fd)
    commands = os.fdopen(cmd_fd, "r", encoding="utf-8")
    for line in commands:
        cmd = json.loads(line)
        reply = harness.dispatch(cmd)
        if reply is None:
            break
        harness.send(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
