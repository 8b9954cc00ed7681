"""A warm parent for candidates' harnesses, inside their sandbox (gate/zygote.py starts it).

Run as `python -I zygote_server.py CONTROL_FD` inside the same sandbox a harness gets (bwrap:
read-only root, no network, its own PID namespace...). It imports torch and triton once (never
CUDA: a forked child initialises its own), then forks one child per request, one at a time;
the child runs the harness script as a fresh `python -I harness.py 3 4` would, but without
paying the imports. Like the harness, this file imports nothing from klineage (it is copied
into the sandbox).

What keeps one candidate from reaching the next, beyond the sandbox itself:
- this process is not dumpable (PR_SET_DUMPABLE 0): a child of the same uid cannot ptrace it,
  read or write its memory through /proc, or open its file descriptors (the control socket);
  the child closes its inherited copy of every descriptor but the three it is given;
- a child's memory is its own (fork copies on write), and the next child forks from this
  process, which runs no candidate code;
- after each child ends (or is killed on request), every other process in the PID namespace is
  killed (kill(-1, SIGKILL)) and every writable place (the request's folder, the sandbox's
  home and tmp, /tmp, /dev/shm) is emptied before the next request is read;
- a child that kills or stops this process only ends the zygote: the parent sees its socket
  close or its replies stop, kills the sandbox and starts the next candidate fresh.

Protocol (a SOCK_SEQPACKET socket, one JSON message a packet): "ready" once; then per
{"op": "run", "script", "cwd", "env", "limits", "wipe"} with three descriptors (commands,
replies, log) attached: {"op": "started", "pid"}, later {"op": "exited", "returncode"};
{"op": "kill"} while a child runs ends it (the "exited" reply follows); {"op": "exit"} or the
parent's end closing stops the zygote.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import time
from typing import Any

PR_SET_DUMPABLE = 4
MAX_MESSAGE = 1 << 16


def _dumpable(value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")


def _send(ctrl: socket.socket, **msg: Any) -> None:
    ctrl.send(json.dumps(msg).encode())


def _empty(folder: str) -> None:
    """Remove everything inside `folder` (the folder stays)."""
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)


def _child(req: dict[str, Any], fds: list[int], ctrl: socket.socket) -> None:
    """In the forked child: the request's descriptors at 0-4, limits, environment; then the
    harness script as __main__. Never returns."""
    code = 70
    try:
        ctrl.close()
        os.setsid()
        _dumpable(1)  # its own process is as inspectable as a fresh one (this one is not)
        cmd_r, rep_w, log = fds
        null = os.open(os.devnull, os.O_RDONLY)
        for src, dst in ((null, 0), (log, 1), (log, 2), (cmd_r, 3), (rep_w, 4)):
            os.dup2(src, dst)
        os.closerange(5, 1 << 16)
        for name, (soft, hard) in req["limits"].items():
            which = getattr(resource, name)
            _, ceiling = resource.getrlimit(which)  # never above this process's own
            if ceiling != resource.RLIM_INFINITY:
                soft, hard = min(soft, ceiling), min(hard, ceiling)
            resource.setrlimit(which, (soft, hard))
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        sys.argv = [req["script"], "3", "4"]
        import runpy

        runpy.run_path(req["script"], run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # the harness's own errors are in its log, as a fresh process's
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _sweep(wipe: list[str]) -> None:
    """Kill every process left in the namespace but this one, reap ours, empty the writable
    places: nothing a child started or wrote is there for the next."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(-1, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.01)
    for folder in [
        *wipe,
        "/tmp",
        "/dev/shm",
        os.environ.get("HOME", ""),
        os.environ.get("TMPDIR", ""),
    ]:
        if folder:
            _empty(folder)


def _run(ctrl: socket.socket, req: dict[str, Any], fds: list[int]) -> None:
    pid = os.fork()
    if pid == 0:
        _child(req, fds, ctrl)
    for fd in fds:
        os.close(fd)
    _send(ctrl, op="started", pid=pid)
    pidfd = os.pidfd_open(pid)
    status = None
    try:
        while status is None:
            ready, _, _ = select.select([ctrl.fileno(), pidfd], [], [])
            if ctrl.fileno() in ready:
                raw = ctrl.recv(MAX_MESSAGE)
                if not raw or json.loads(raw).get("op") in ("kill", "exit"):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    if not raw:
                        _sweep(req.get("wipe", []))
                        sys.exit(0)
            if ready:
                done, st = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = st
    finally:
        os.close(pidfd)
    _sweep(req.get("wipe", []))
    _send(ctrl, op="exited", returncode=os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python zygote_server.py CONTROL_FD", file=sys.stderr)
        return 2
    ctrl = socket.socket(fileno=int(argv[1]))
    t0 = time.perf_counter()
    import torch  # noqa: F401  (the point: once, here, not in every child)
    import triton
    import triton.language  # noqa: F401

    _dumpable(0)
    _send(
        ctrl,
        op="ready",
        seconds=round(time.perf_counter() - t0, 3),
        threads=len(os.listdir("/proc/self/task")),
    )
    while True:
        try:
            raw, fds, _, _ = socket.recv_fds(ctrl, MAX_MESSAGE, 3)
        except OSError:
            return 0
        if not raw:
            return 0
        req = json.loads(raw)
        if req.get("op") == "exit":
            return 0
        if req.get("op") == "run" and len(fds) == 3:
            _run(ctrl, req, fds)
        else:
            for fd in fds:
                os.close(fd)
            _send(
                ctrl,
                op="error",
                message=f"unexpected request {req.get('op')!r} with {len(fds)} fds",
            )


if __name__ == "__main__":
    sys.exit(main(sys.argv))
