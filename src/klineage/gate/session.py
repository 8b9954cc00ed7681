"""The parent's side of one gate call: two isolated processes, and the checks between them.

1. The reference process (gate/reference.py, sandboxed: problem files are untrusted code too)
   writes every case's inputs and expected outputs. Its faults are the problem's.
2. The expected outputs move to a folder only the parent can read; the candidate's harness
   (gate/harness.py, sandboxed, no klineage code in its process) is started with the inputs.
3. The parent sends one call at a time and compares what comes back, here, where the candidate
   cannot reach: every call is checked, calls are issued in an order and number it cannot know,
   inputs change in place between calls, and on a GPU the forward is replayed from a CUDA graph
   and its device kernels are listed.

Everything the harness sends is untrusted data: a reply that does not validate, a file that is
not plain tensors, a process that dies or hangs is a rejection with its reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from klineage.gate.gpulock import RELEASE, GpuLock, LockMode
from klineage.gate.protocol import (
    MAX_REPLY_BYTES,
    RefError,
    RefManifest,
    RefRequest,
)
from klineage.gate.sandbox import IsolationLevel, Limits, SandboxSpec, sandbox_command
from klineage.gate.threads import gate_threads
from klineage.gate.zygote import Staged, ZygoteChild
from klineage.gate.zygote import enabled as zygote_enabled
from klineage.gate.zygote import harness_process as warm_harness

R = TypeVar("R", bound=BaseModel)
_SRC_ROOT = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).with_name("harness.py")
# The harness's own modules (no klineage imports), copied beside it and imported as siblings:
# its monitors and its timing.
HARNESS_SIBLINGS = tuple(
    Path(__file__).with_name(name)
    for name in ("harness_monitors.py", "harness_gpu.py", "devtime.py")
)


class CandidateDied(Exception):
    """The candidate's process hung, died, or sent something that is not a reply."""


class ProblemFault(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Clock:
    """The candidate's time budget; time spent waiting for the GPU lock is not charged.
    `waited` is every wait, `waited_exclusive` the part of it spent waiting to time."""

    timeout_s: float
    start: float = field(default_factory=time.monotonic)
    waited: float = 0.0
    waited_exclusive: float = 0.0

    def left(self) -> float:
        return self.timeout_s - (time.monotonic() - self.start - self.waited)


def killed_by(rc: int) -> int | None:
    """The signal that ended a child, if one did. Under bubblewrap a child killed by signal N
    exits with 128 + N rather than -N (bwrap is the process we wait for)."""
    if rc < 0:
        return -rc
    if rc > 128 and (rc - 128) in {s.value for s in signal.Signals}:
        return rc - 128
    return None


def signal_name(code: int) -> str:
    """The name and meaning of signal `code` (a positive number)."""
    code = -abs(code)
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"signal {-code}"
    meaning = {
        signal.SIGSEGV: "segmentation fault",
        signal.SIGABRT: "abort",
        signal.SIGKILL: "killed (out of memory?)",
        signal.SIGBUS: "bus error",
        signal.SIGFPE: "floating-point exception",
        signal.SIGXCPU: "CPU time limit",
        signal.SIGXFSZ: "file size limit",
    }
    return f"{sig.name} ({meaning.get(sig, 'signal')})"


def tail(path: Path, lines: int = 12, limit: int = 4000) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[-limit * 4 :]
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])[-limit:]


def limits_for(device: str, timeout_s: float) -> Limits:
    return Limits(
        memory_bytes=None if device == "cuda" else 12 << 30,
        file_size_bytes=(64 << 30) if device == "cuda" else (4 << 30),
        cpu_seconds=int(max(60.0, timeout_s * 4)),
        processes=None,
    )


def _kill(proc: subprocess.Popen[bytes] | ZygoteChild) -> None:
    if isinstance(proc, ZygoteChild):  # its pid is the zygote's namespace's, not ours
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()


# -- the reference process ------------------------------------------------------------------------


def run_reference(
    req: RefRequest, workdir: Path, isolation: IsolationLevel | None, clock: Clock
) -> tuple[RefManifest, Path]:
    """Inputs and expected outputs of every case; raises ProblemFault naming the problem file.

    On a GPU the reference process asks for the GPU lock over a pipe (gpulock.LockByProxy) and
    this process holds it for it: shared while it builds cases and warms torch.compile up,
    exclusive only while it times. The lock's files never reach the sandbox, the wait is added
    to `clock.waited` and not charged, and the lock is released when the process ends, however."""
    out = workdir / "ref"
    out.mkdir()
    req_path = workdir / "ref-request.json"
    req_path.write_text(req.model_dump_json(), encoding="utf-8")
    log = workdir / "ref.log"
    argv = [sys.executable, "-m", "klineage.gate.reference", str(req_path), str(out)]
    cuda = req.device == "cuda"
    # The child's ends: it asks on ask_w and reads "ok" from ok_r; ours are ask_r and ok_w.
    (ask_r, ask_w), (ok_r, ok_w) = (os.pipe(), os.pipe()) if cuda else ((-1, -1), (-1, -1))
    if cuda:
        argv += [str(ask_w), str(ok_r)]
    spec = sandbox_command(
        argv,
        workdir=workdir / "ref-sandbox",
        readonly=[*_python_path(), Path(req.problem).parent, req_path],
        writable=[out],
        device=req.device,
        limits=limits_for(req.device, clock.timeout_s),
        level=isolation,
        env_keep=_child_env(req.device, with_src=True),
        pass_fds=(ask_w, ok_r) if cuda else (),
    )
    lock = GpuLock(clock, active=cuda)
    lock.what = "reference"
    try:
        proc = start_sandboxed(spec, log)
        for fd in (ask_w, ok_r):
            if fd >= 0:
                os.close(fd)
        try:
            finished = _hold_lock_for(proc, lock, ask_r if cuda else None, ok_w, clock, req.problem)
        finally:
            if proc.poll() is None:  # timed out, a bad lock request, or we were interrupted
                _kill(proc)
    finally:
        lock.close()
        for fd in (ask_r, ok_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
    if not finished:
        raise ProblemFault(
            f"{req.problem}: the problem did not finish making inputs and reference outputs "
            f"within {clock.timeout_s:g} s (get_inputs or Model hangs, or the regimes are too "
            "large for this device: shrink them with --set)"
        )
    err_file = out / "error.json"
    if err_file.exists():
        try:
            err = RefError.model_validate_json(err_file.read_text(encoding="utf-8"))
        except (ValidationError, OSError) as e:
            raise ProblemFault(
                f"{req.problem}: the reference process wrote an unreadable error ({e})"
            ) from e
        raise ProblemFault(err.message)
    try:
        manifest = RefManifest.model_validate_json(
            (out / "manifest.json").read_text(encoding="utf-8")
        )
    except (OSError, ValidationError) as e:
        sig = killed_by(proc.returncode)
        how = (
            f"was killed by {signal_name(sig)}"
            if sig is not None
            else f"exited with code {proc.returncode}"
        )
        last = tail(log)
        raise ProblemFault(
            f"{req.problem}: the problem's process {how} before writing its reference outputs"
            + (f"; last output:\n{last}" if last else "")
        ) from e
    return manifest, out


def _hold_lock_for(
    proc: subprocess.Popen[bytes],
    lock: GpuLock,
    ask_r: int | None,
    ok_w: int,
    clock: Clock,
    problem: str,
) -> bool:
    """Wait for the reference process, holding the GPU lock in the modes it asks for (one word
    and a newline per request: a LockMode value or "release"; each answered "ok"). False when
    its time ran out; ProblemFault on a request that is not one of those words."""
    buf = b""
    while True:
        left = clock.left()
        if left <= 0:
            return False
        if ask_r is None:  # no lock to hold (the CPU), or the child closed its end
            try:
                proc.wait(timeout=left)
                return True
            except subprocess.TimeoutExpired:
                continue
        ready, _, _ = select.select([ask_r], [], [], min(left, 0.5))
        if not ready:
            if proc.poll() is not None:
                return True
            continue
        chunk = os.read(ask_r, 256)
        if not chunk:
            ask_r = None
            continue
        buf += chunk
        while b"\n" in buf:
            line, _, buf = buf.partition(b"\n")
            word = line.decode("ascii", "replace")
            if word == RELEASE:
                lock.release()
            elif word in {m.value for m in LockMode}:
                lock.acquire(LockMode(word))
            else:
                raise ProblemFault(
                    f"{problem}: the problem's process sent {word[:40]!r} on the GPU lock channel "
                    "(the problem's code writing to a file descriptor it did not open?)"
                )
            with contextlib.suppress(OSError):  # it may have died meanwhile: seen next turn
                os.write(ok_w, b"ok\n")
        if len(buf) > 64:
            raise ProblemFault(f"{problem}: the problem's process flooded the GPU lock channel")


def _python_path() -> list[Path]:
    """klineage's source and the parent's PYTHONPATH entries (where pydantic may live, as on the
    GPU machine): the reference process imports klineage, the harness does not."""
    extra = [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [_SRC_ROOT, *(p.resolve() for p in extra if p.is_dir() and p.resolve() != _SRC_ROOT)]


def start_sandboxed(spec: SandboxSpec, log: Path) -> subprocess.Popen[bytes]:
    """Start `spec` (a reference, a harness or a zygote), its stdout and stderr to `log`."""
    with open(log, "wb") as logf:
        return subprocess.Popen(
            spec.argv,
            env=spec.env,
            cwd=spec.cwd,
            preexec_fn=spec.preexec_fn,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            pass_fds=spec.pass_fds,
        )


def _child_env(device: str, *, with_src: bool) -> dict[str, str]:
    env: dict[str, str] = {}
    threads = gate_threads(device)
    if threads is not None:  # read by torch's OpenMP pool when the child imports torch
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    if with_src:  # the reference process
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in _python_path())
        # torch.compile compiles in the reference's own process: by default inductor starts a
        # pool of one torch-importing worker per core for each compile, and twelve gate calls
        # side by side on a 16-core host start 192 of them. The graphs are one problem's
        # forward, small enough to compile in-process. The user's own setting wins.
        env["TORCHINDUCTOR_COMPILE_THREADS"] = os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


# -- the candidate's harness ----------------------------------------------------------------------


class Harness:
    """The candidate's process, driven one command at a time."""

    def __init__(
        self,
        candidate: Path,
        device: str,
        workdir: Path,
        inputs: Path,
        clock: Clock,
        isolation: IsolationLevel | None,
    ) -> None:
        self.clock = clock
        self.device = device
        self.workdir = workdir
        self.log = workdir / "candidate.log"
        self.out = workdir / "out"
        self.out.mkdir()
        run_dir = workdir / "run"
        run_dir.mkdir()
        script = run_dir / "main.py"
        shutil.copyfile(HARNESS, script)
        for sibling in HARNESS_SIBLINGS:
            shutil.copyfile(sibling, run_dir / sibling.name)
        cmd_r, self._cmd_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        self.inputs = inputs  # as the harness sees them: a zygote's are linked into its spool
        self.proc: subprocess.Popen[bytes] | ZygoteChild
        warm = self._warm(candidate, inputs, cmd_r, rep_w) if isolation is None else None
        if warm is not None:
            self.proc, staged, description = warm
            self.inputs, self.out = staged.inputs, staged.out
            self.level = IsolationLevel.BWRAP
            self.description = description + "; forked from a warm zygote (gate/zygote.py)"
        else:
            spec = sandbox_command(
                [sys.executable, "-I", str(script), str(cmd_r), str(rep_w)],
                workdir=workdir / "sandbox",
                readonly=[candidate.parent, inputs, run_dir],
                writable=[self.out],
                device=device,
                limits=limits_for(device, clock.timeout_s),
                level=isolation,
                env_keep=_child_env(device, with_src=False),
                pass_fds=(cmd_r, rep_w),
            )
            self.level = spec.level
            self.description = spec.description
            self.proc = start_sandboxed(spec, self.log)
        os.close(cmd_r)
        os.close(rep_w)
        self._buf = b""
        self._next = 1
        self.timed_out = False

    def _warm(
        self, candidate: Path, inputs: Path, cmd_r: int, rep_w: int
    ) -> tuple[ZygoteChild, Staged, str] | None:
        """A harness forked from a warm zygote (unless KLINEAGE_ZYGOTE=0), or None: a fresh one."""
        if not zygote_enabled():
            return None
        log = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            return warm_harness(
                candidate,
                self.device,
                inputs,
                limits_for(self.device, self.clock.timeout_s),
                _child_env(self.device, with_src=False),
                (cmd_r, rep_w, log),
            )
        finally:
            os.close(log)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._cmd_w, b'{"op": "exit"}\n')
        with contextlib.suppress(OSError):
            os.close(self._cmd_w)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2.0)
        _kill(self.proc)
        with contextlib.suppress(OSError):
            os.close(self._rep_r)

    def _death(self) -> str:
        rc = self.proc.poll()
        last = tail(self.log)
        if rc is None or self.timed_out:
            return f"timed out after {self.clock.timeout_s:g} s (infinite loop or hang?); the candidate's process was killed"
        sig = killed_by(rc)
        how = (
            f"killed by {signal_name(sig)}"
            if sig is not None
            else f"exited with code {rc} before finishing (os._exit or sys.exit in the candidate?)"
        )
        return f"candidate process {how}" + (f"; last output:\n{last}" if last else "")

    def request(self, cmd: dict[str, Any], model: type[R]) -> R:
        cmd = {**cmd, "id": self._next}
        self._next += 1
        try:
            os.write(self._cmd_w, (json.dumps(cmd) + "\n").encode())
        except OSError:
            self.proc.wait(timeout=5)
            raise CandidateDied(self._death()) from None
        while b"\n" not in self._buf:
            left = self.clock.left()
            if left <= 0:
                self.timed_out = True
                _kill(self.proc)
                raise CandidateDied(self._death())
            ready, _, _ = select.select([self._rep_r], [], [], min(left, 0.5))
            if not ready:
                if self.proc.poll() is not None:
                    raise CandidateDied(self._death())
                continue
            chunk = os.read(self._rep_r, 1 << 16)
            if not chunk:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=5)
                raise CandidateDied(self._death())
            self._buf += chunk
            if len(self._buf) > MAX_REPLY_BYTES:
                _kill(self.proc)
                raise CandidateDied(
                    "the candidate's process flooded the reply channel (a reply over 1 MiB)"
                )
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            reply = model.model_validate_json(line)
        except ValidationError as e:
            _kill(self.proc)
            raise CandidateDied(
                f"the candidate's process sent a malformed reply ({e.error_count()} error(s): {str(e).splitlines()[0]})"
            ) from None
        if getattr(reply, "id", None) != cmd["id"]:
            _kill(self.proc)
            raise CandidateDied(
                f"the candidate's process answered command {getattr(reply, 'id', None)} to command {cmd['id']}"
            )
        return reply


def load_outputs(path: Path) -> list[Any]:
    """A candidate's outputs, read as data: plain tensors and numbers, nothing else."""
    import torch

    try:
        payload = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as e:
        raise CandidateDied(
            f"the candidate's outputs could not be read as tensors ({type(e).__name__}: {str(e)[:200]})"
        ) from None
    if not isinstance(payload, dict) or not isinstance(payload.get("outputs"), list):
        raise CandidateDied("the candidate's output file does not hold an output list")
    outs: list[Any] = payload["outputs"]
    for k, o in enumerate(outs):
        if not (o is None or type(o) is torch.Tensor or isinstance(o, bool | int | float)):
            raise CandidateDied(f"output {k} came back as {type(o).__name__}")
    return outs
