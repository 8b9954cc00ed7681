"""The candidate's side of the gate: a standalone script, run isolated, that holds only the
candidate module, torch and triton.

This file imports nothing from klineage, on purpose: it is copied into the sandbox and run as a
plain script, so the candidate's process holds no reference model, no expected output, no
comparison and no klineage module that it could read, patch or detect. The parent
(gate/session.py) sends commands as JSON lines on one file descriptor and reads replies on
another; every output the candidate computes is written to a file as tensors, and the parent
compares it with the reference, which ran in another process. Its own modules are copied
beside it and imported as plain siblings: harness_monitors.py (the instrumentation),
harness_gpu.py (the graph replay check, the device kernel list, timing) and devtime.py (the
timer); none of them imports klineage either.

What runs here (harness_monitors.py) is instrumentation that reports what the forward did (aten ops outside Triton
launches, host reads of tensor memory, threads, forks, ctypes, sockets, custom ops, tensor
subclasses). Its reports are claims from a process the candidate controls: they catch the
candidate that does not know about them, and the parent trusts none of them for correctness.

Run as: python harness.py CMD_FD REPLY_FD
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import Any

# The harness's own modules are copied beside this script (gate/session.py); python -I leaves
# its folder off the path, so it is put there for these imports only.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import harness_gpu as GPU
    from harness_monitors import (
        STATE,
        install_mode_guards,
        install_process_guards,
        install_triton_hooks,
        make_monitors,
    )
finally:
    sys.path.pop(0)


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

KEEP_INPUT_BYTES = 2 << 30
"""Bytes of case inputs a harness keeps in memory (Harness.read_inputs): a regime's cases of the
reverse cumsum (5 x 168 MB) stay while every autotune config runs them."""


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
        # Case inputs read from disk, by (path, mtime, size), least recently used dropped first
        # past KEEP_INPUT_BYTES: the gate runs a regime's cases under each autotune config in
        # turn, so each file was read once per config (a 7-config table on the reverse cumsum:
        # 168 calls of 61-84M elements). Only copies are handed out (read_inputs).
        self.read: dict[tuple[str, int, int], list[Any]] = {}

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
        install_triton_hooks()
        install_mode_guards()
        self.monitors = make_monitors()
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
            return {
                "ok": False,
                "error": f"exits while being imported (SystemExit {e.code})",
                "line": line,
                "source_line": text,
                "expected": "a module that defines classes and functions without exiting",
            }
        except BaseException as e:
            line, text = _line_in(self.path, e)
            return {
                "ok": False,
                "error": f"{type(e).__name__} while importing: {e}",
                "line": line,
                "source_line": text,
                "expected": "a module that imports without error",
            }
        import inspect

        import torch.nn as nn

        cls = vars(module).get("ModelNew")
        if cls is None:
            defined = sorted(
                n for n, v in vars(module).items() if inspect.isclass(v) and v.__module__ == name
            )
            return {
                "ok": False,
                "error": f"no class ModelNew defined (classes here: {', '.join(defined) or 'none'})",
                "line": None,
                "expected": "class ModelNew(nn.Module) at module level",
            }
        if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
            return {
                "ok": False,
                "error": f"ModelNew is {type(cls).__name__}, not an nn.Module subclass",
                "line": None,
                "expected": "class ModelNew(nn.Module)",
            }
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
                    f"ModelNew(*get_init_inputs()) failed: {e}",
                    line,
                    f"ModelNew.__init__ to accept the problem's init inputs ({len(init)} positional: "
                    f"{', '.join(type(v).__name__ for v in init) or 'none'})",
                ) from e
            self.models[regime] = m.to(self.device).eval()
        return self.models[regime]

    def read_inputs(self, path: str) -> list[Any]:
        """A case's inputs as stored (on the CPU), read from disk once while they are kept."""
        import torch

        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        if key in self.read:
            self.read[key] = self.read.pop(key)  # now the most recently used
            return self.read[key]
        values = list(torch.load(path, weights_only=True)["inputs"])

        def size(vs: list[Any]) -> int:
            return sum(v.numel() * v.element_size() for v in vs if isinstance(v, torch.Tensor))

        held = size(values)
        for old in list(self.read):  # oldest first; the new one stays even alone over the cap
            if held + sum(size(v) for v in self.read.values()) <= KEEP_INPUT_BYTES:
                break
            del self.read[old]
        self.read[key] = values
        return values

    def inputs(self, cmd: dict[str, Any]) -> list[Any]:
        import torch

        # copy=True: the kept tensors never reach the candidate (on the CPU, .to would hand
        # them out as they are, and a buffer case copies new contents into what it holds)
        values = [
            v.to(self.device, copy=True) if isinstance(v, torch.Tensor) else v
            for v in self.read_inputs(cmd["inputs"])
        ]
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
            return {
                **reply,
                "ok": False,
                "error": short_error(e),
                "skip": skip,
                "fatal": fatal,
                "line": line,
                "source_line": source_line,
                "violations": list(STATE.violations),
                "forced": dict(STATE.forced),
                "autotuners": dict(STATE.autotuners),
            }
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
                saved.append(o.detach().to("cpu", copy=True))  # one copy, off the GPU
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
        return {
            **reply,
            "ok": True,
            "launches": STATE.launches,
            "kernels": sorted(STATE.kernels),
            "violations": list(STATE.violations),
            "autotuners": dict(STATE.autotuners),
            "forced": dict(STATE.forced),
            "mutated": mutated,
            "seconds": seconds,
        }

    def dispatch(self, cmd: dict[str, Any]) -> dict[str, Any] | None:
        op = cmd.get("op")
        if op == "load":
            return {"id": cmd.get("id", 0), **self.load(cmd)}
        if op == "call":
            return self.call(cmd)
        reply: dict[str, Any]  # harness_gpu is a sibling script: typed here, where it is used
        if op == "graph_check":
            reply = GPU.graph_check(self, cmd, short_error)
            return reply
        if op == "kernels":
            reply = GPU.kernels(self, cmd)
            return reply
        if op == "time":
            try:
                reply = GPU.time_round(self, cmd)
            except BaseException as e:
                # A config the autotuner would skip (out of shared memory, say) is a config the
                # sweep cannot time, not a dead candidate: on the H200 (2026-12-04) one table
                # entry needing 320 KB of shared memory took the whole candidate down.
                if not any(c.__name__ in AUTOTUNER_SKIPPED_ERRORS for c in type(e).__mro__):
                    raise
                return {"id": cmd["id"], "ok": False, "error": short_error(e), "skip": True}
            return reply
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
    install_process_guards()
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
