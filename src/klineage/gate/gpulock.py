"""One GPU shared by many gate calls: a reader-writer lock between processes, by flock.

Work on the GPU that does not time (the reference's cases and expected outputs, its
torch.compile warm-up, the candidate's compile stage and correctness calls) takes the lock
SHARED: any number of such calls run at once. Timing (the profile stage, the reference's eager
and torch.compile timing) takes it EXCLUSIVE, and only for the timing itself, so nothing else
runs on the device while a kernel is timed. One exclusive lock for everything made twelve gate
workers on an H200 queue behind each other's torch.compile: no call finished in 300 s
(docs/benchmarks.md, "Under load").

Two files per visible device, in $KLINEAGE_GPU_LOCK_DIR or /tmp:
- `klineage-gpu-<device>.lock`, the lock itself: LOCK_SH for readers, LOCK_EX for writers. A gate
  from before this lock takes LOCK_EX on the same file, so old and new calls still exclude
  each other's timing.
- `klineage-gpu-<device>.turnstile`: everyone passes it (LOCK_EX) on the way in. A writer holds
  it while it waits for the readers inside to leave, so readers that come later wait behind
  the writer instead of keeping it out forever (flock alone starves writers: a steady stream
  of shared holders never leaves the file unlocked). Readers hold it only while taking LOCK_SH.
Both are always taken in that order (turnstile, then lock), so no two holders wait on each
other in a cycle. flock belongs to an open file description: each GpuLock opens its own, so two
in one process (threads, tests) are two holders, and a lock dies with the process that held it.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from klineage.gate.session import Clock


# A block of GPU work's hold on the lock (GpuLock.shared, a mode's `held`, or nullcontext).
Hold = Callable[[], contextlib.AbstractContextManager[Any]]


class LockMode(enum.StrEnum):
    SHARED = "shared"  # GPU work that does not time
    EXCLUSIVE = "exclusive"  # timing


def lock_paths(directory: Path | None = None) -> tuple[Path, Path]:
    """(lock file, turnstile file) for the first visible device."""
    ident = os.environ.get("CUDA_VISIBLE_DEVICES", "all").split(",")[0] or "all"
    d = directory or Path(os.environ.get("KLINEAGE_GPU_LOCK_DIR", "/tmp"))
    stem = f"klineage-gpu-{ident.replace('/', '_')}"
    return d / f"{stem}.lock", d / f"{stem}.turnstile"


def _log_hold(mode: LockMode, waited: float, held: float, what: str) -> None:
    """One line per hold to $KLINEAGE_GPU_LOCK_LOG when set (benchmarks: who holds the GPU, in
    which mode, how long, after how long a wait). Appends of one short line are atomic."""
    path = os.environ.get("KLINEAGE_GPU_LOCK_LOG")
    if path:
        hold = {
            "t": round(time.time(), 3),
            "pid": os.getpid(),
            "mode": str(mode),
            "wait_s": round(waited, 4),
            "held_s": round(held, 4),
            "what": what,
        }
        line = json.dumps(hold) + "\n"
        with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as f:
            f.write(line)


class _Holds:
    """`held(mode)`: a lock's mode for a block, released after it."""

    def acquire(self, mode: LockMode) -> object:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def held(self, mode: LockMode) -> Iterator[None]:
        self.acquire(mode)
        try:
            yield
        finally:
            self.release()


class GpuLock(_Holds):
    """One holder of the GPU lock, in one mode at a time (or none); see the module docstring.

    `acquire(mode)` blocks until the mode is held; the seconds it waited are added to
    `clock.waited` (and to `clock.waited_exclusive` for EXCLUSIVE), which the candidate's time
    budget does not count. Changing mode releases first and queues again through the turnstile
    (an upgrade in place could deadlock two readers upgrading at once). `active=False` (the CPU)
    makes every method a no-op. `close()` releases and closes the files; so does the end of the
    process."""

    def __init__(
        self, clock: Clock | None = None, *, active: bool = True, directory: Path | None = None
    ) -> None:
        self.clock = clock
        self.active = active
        self.directory = directory
        self.mode: LockMode | None = None
        self._fds: tuple[int, int] | None = None
        self._since = self._waited = 0.0
        self.what = ""  # the work the holds are for, in the hold log (the caller sets it)

    def _open(self) -> tuple[int, int]:
        if self._fds is None:
            main, turnstile = lock_paths(self.directory)
            # O_CLOEXEC (Python's default): no child process, sandboxed or not, inherits them.
            fds = [os.open(p, os.O_CREAT | os.O_RDWR, 0o666) for p in (main, turnstile)]
            self._fds = (fds[0], fds[1])
        return self._fds

    def acquire(self, mode: LockMode) -> float:
        """Hold the lock in `mode`; returns the seconds waited for it (0 when already held)."""
        if not self.active or self.mode is mode:
            return 0.0
        self.release()
        main, turnstile = self._open()
        t0 = time.monotonic()
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(main, fcntl.LOCK_SH if mode is LockMode.SHARED else fcntl.LOCK_EX)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        waited = time.monotonic() - t0
        self.mode = mode
        self._since, self._waited = time.monotonic(), waited
        if self.clock is not None:
            self.clock.waited += waited
            if mode is LockMode.EXCLUSIVE:
                self.clock.waited_exclusive += waited
        return waited

    def release(self) -> None:
        if self.mode is not None and self._fds is not None:
            fcntl.flock(self._fds[0], fcntl.LOCK_UN)
            _log_hold(self.mode, self._waited, time.monotonic() - self._since, self.what)
        self.mode = None

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """SHARED for the block unless a mode is held already (then the block runs under it and
        nothing is released after): one GPU call's hold, so a caller that times gets in
        between calls rather than behind a whole stage of CPU-side comparisons."""
        if self.mode is not None or not self.active:
            yield
            return
        with self.held(LockMode.SHARED):
            yield

    def close(self) -> None:
        self.release()
        if self._fds is not None:
            for fd in self._fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds = None

    def __enter__(self) -> GpuLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def gpu_lock(clock: Clock | None, mode: LockMode = LockMode.EXCLUSIVE) -> Iterator[None]:
    """The GPU lock in `mode` for the block (a GpuLock of its own); the wait goes to `clock`."""
    with GpuLock(clock) as lock, lock.held(mode):
        yield


# -- the reference process's side -------------------------------------------------------------------

RELEASE = "release"  # besides the LockMode values, the one other request a child may send


class LockByProxy(_Holds):
    """The GPU lock as the sandboxed reference process sees it: the parent holds it on its
    behalf (gate/session.py: run_reference). `acquire(mode)` writes the mode's name and a
    newline to `ask_fd` and returns when the parent answers "ok" on `ok_fd`, holding it.

    The lock files are never opened in the child, so nothing there (the problem's code included)
    can hold the GPU beyond what the parent grants, and the parent, not the child, measures the
    wait it does not charge. Without fds (the CPU, or the module run by hand) it does nothing."""

    def __init__(self, ask_fd: int | None = None, ok_fd: int | None = None) -> None:
        self.ask_fd, self.ok_fd = ask_fd, ok_fd
        self.mode: LockMode | None = None

    def _ask(self, word: str) -> None:
        if self.ask_fd is None or self.ok_fd is None:
            return
        os.write(self.ask_fd, word.encode("ascii") + b"\n")
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = os.read(self.ok_fd, 16)
            if not chunk:
                raise RuntimeError("the gate's parent process closed the GPU lock channel")
            answer += chunk
        if answer != b"ok\n":
            raise RuntimeError(f"the gate's parent answered {answer!r} to a GPU lock request")

    def acquire(self, mode: LockMode) -> None:
        if self.mode is not mode:
            self._ask(mode.value)
            self.mode = mode

    def release(self) -> None:
        if self.mode is not None:
            self._ask(RELEASE)
            self.mode = None
