"""Warm sandboxes for candidates' harnesses: torch and triton imported once per worker, a fresh
forked child per candidate (issue 14: a harness's own torch import was 4-5 s of a 32 s warm
gate call on the H200, about 2 s of a CPU call here).

On by default at the bubblewrap level; KLINEAGE_ZYGOTE=0 in the gate's parent starts a fresh
sandboxed process per candidate instead (measured: a warm CPU call 3.4-4.2 s against 5.6-5.9 s,
on the H200 the candidate's import 0.1 s against 4.8 s, docs/benchmarks.md). A Zygote is one sandbox
(gate/sandbox.py, the strongest level, as for a harness) running gate/zygote_server.py, whose
module docstring says what keeps one candidate from the next. It exposes, read-only, the
candidate's folder (the zygote is kept per folder: a walk's or an optimize run's candidates
share one) and its own spool, where each request gets its inputs (hard links to the call's
input files: the private expected outputs never enter the spool) and a writable out folder.

`harness_process(candidate, device, ...)` returns a zygote child for a Harness, or None when
the warm path is off, the level is not bubblewrap (only bwrap's own PID namespace makes the
zygote's sweep complete), or the zygote cannot start or answer: the caller then starts a fresh
process, as before. A zygote that dies, stops answering or is busy is replaced, never waited on.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from klineage.gate import isolation
from klineage.gate.sandbox import IsolationLevel, Limits, sandbox_command

SERVER = Path(__file__).with_name("zygote_server.py")
READY_S = 120.0  # torch + triton import on a loaded host
_LIMIT_NAMES = {
    "memory_bytes": "RLIMIT_AS",
    "file_size_bytes": "RLIMIT_FSIZE",
    "cpu_seconds": "RLIMIT_CPU",
    "open_files": "RLIMIT_NOFILE",
}


def enabled() -> bool:
    return os.environ.get("KLINEAGE_ZYGOTE", "1").strip() not in ("0", "false", "no", "off")


@dataclass
class Staged:
    """One request's folders in the spool: what the harness is told and where it writes."""

    inputs: Path
    out: Path
    home: Path


class ZygoteChild:
    """The Popen calls a Harness makes, answered by the zygote: poll, wait, kill."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote, self.pid = zygote, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exited(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.exited(3600.0 if timeout is None else timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired("zygote child", timeout or 0.0)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            self.zygote.kill_child()


class Zygote:
    def __init__(self, device: str, folder: Path, limits: Limits, env_keep: dict[str, str]) -> None:
        self.device, self.folder = device, folder
        self.busy = False
        self.dead = False
        self._n = 0
        self._staged_ro: Path | None = None
        self.spool = Path(tempfile.mkdtemp(prefix="kl-zygote-"))
        os.chmod(self.spool, 0o700)
        self.ro, self.rw = self.spool / "ro", self.spool / "rw"
        server = self.ro / "server"
        server.mkdir(parents=True)
        self.rw.mkdir()
        from klineage.gate.session import HARNESS, HARNESS_SIBLINGS, start_sandboxed

        for f in (SERVER, HARNESS, *HARNESS_SIBLINGS):
            shutil.copyfile(f, server / f.name)
        self.script = server / HARNESS.name
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctrl = ours
        spec = sandbox_command(
            [sys.executable, "-I", str(server / SERVER.name), str(theirs.fileno())],
            workdir=self.spool / "box",
            readonly=[self.ro, folder],
            writable=[self.rw],
            device=device,
            limits=limits,
            level=IsolationLevel.BWRAP,
            env_keep=env_keep,
            pass_fds=(theirs.fileno(),),
        )
        self.env, self.description = spec.env, spec.description
        self.box = Path(spec.cwd)
        self.log = self.spool / "zygote.log"
        self.proc = start_sandboxed(spec, self.log)
        theirs.close()
        ready = self._recv(READY_S)
        if ready is None or ready.get("op") != "ready":
            self.close()
            raise OSError(f"the zygote did not start: {ready!r}")

    def _recv(self, timeout: float) -> dict[str, Any] | None:
        ready, _, _ = select.select([self.ctrl], [], [], max(0.0, timeout))
        if not ready:
            return None
        raw = self.ctrl.recv(1 << 16)
        if not raw:
            self.dead = True
            return None
        msg: dict[str, Any] = json.loads(raw)
        return msg

    def stage(self, inputs: Path) -> Staged:
        """A request's folders: its inputs linked in (read-only to the child), out and home."""
        self._n += 1
        ro, rw = self.ro / f"req-{self._n}", self.rw / f"req-{self._n}"
        self._staged_ro = ro  # removed when the child ends: its links keep GBs of cases alive
        (ro / "inputs").mkdir(parents=True)
        for f in inputs.iterdir():
            try:
                os.link(f, ro / "inputs" / f.name)
            except OSError:
                shutil.copyfile(f, ro / "inputs" / f.name)
        for d in ("out", "home", "tmp"):
            (rw / d).mkdir(parents=True)
        return Staged(inputs=ro / "inputs", out=rw / "out", home=rw / "home")

    def spawn(self, staged: Staged, limits: Limits, fds: tuple[int, int, int]) -> ZygoteChild:
        home = staged.home
        env = {
            **self.env,
            "HOME": str(home),
            "TMPDIR": str(home.parent / "tmp"),
            "TRITON_CACHE_DIR": str(home / ".triton"),
        }
        lim = {
            _LIMIT_NAMES[k]: (v, v)
            for k, v in vars(limits).items()
            if k in _LIMIT_NAMES and v is not None
        }
        lim["RLIMIT_CORE"] = (0, 0)
        req = {
            "op": "run",
            "script": str(self.script),
            "cwd": str(home),
            "env": env,
            "limits": lim,
            "wipe": [str(self.rw), str(self.box)],  # all it can write, emptied after it
        }
        self.busy = True
        socket.send_fds(self.ctrl, [json.dumps(req).encode()], list(fds))
        msg = self._recv(30.0)
        if msg is None or msg.get("op") != "started":
            self.close()
            raise OSError(f"the zygote did not start the harness: {msg!r}")
        return ZygoteChild(self, int(msg["pid"]))

    def exited(self, timeout: float) -> int | None:
        """The child's return code once it has ended (and the sandbox is swept), else None."""
        if self.dead:
            return -signal.SIGKILL
        msg = self._recv(timeout)
        if msg is None:
            if self.dead or self.proc.poll() is not None:
                self.close()
                return -signal.SIGKILL
            return None
        self.busy = False
        if self._staged_ro is not None:
            shutil.rmtree(self._staged_ro, ignore_errors=True)
            self._staged_ro = None
        return int(msg.get("returncode", -signal.SIGKILL))

    def kill_child(self) -> None:
        """End the running child; if the zygote does not answer within 5 s, end the zygote."""
        try:
            self.ctrl.send(b'{"op": "kill"}')
        except OSError:
            self.close()
            return
        if self.exited(5.0) is None:
            self.close()

    def close(self) -> None:
        self.dead = True
        with contextlib.suppress(OSError):
            self.ctrl.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        shutil.rmtree(self.spool, ignore_errors=True)


_POOL: dict[tuple[str, str, int], list[Zygote]] = {}
_LOCK = threading.Lock()
# Zygotes alive at once in this process (each holds torch's memory, ~0.5 GB): past it, the
# least recently used idle one is closed before another starts.
MAX_ZYGOTES = 3
_USED: list[Zygote] = []


def _evict() -> None:
    """Close idle zygotes, least recently used first, until another fits (called locked)."""
    for z in list(_USED):
        if z.dead:
            _USED.remove(z)
    for z in list(_USED):
        if len(_USED) < MAX_ZYGOTES:
            break
        if not z.busy:
            z.close()
            _USED.remove(z)


def harness_process(
    candidate: Path,
    device: str,
    inputs: Path,
    limits: Limits,
    env_keep: dict[str, str],
    fds: tuple[int, int, int],
) -> tuple[ZygoteChild, Staged, str] | None:
    """A warm harness for `candidate`, or None (off, not bubblewrap, or it failed: start a fresh
    process). The key: device, the candidate's folder, and the thread (bwrap dies with the
    thread that started it)."""
    if not enabled() or isolation._resolve_level(None) is not IsolationLevel.BWRAP:
        return None  # off, or another level asked for ($KLINEAGE_ISOLATION) or the only one
    folder = candidate.resolve().parent
    key = (device, str(folder), threading.get_ident())
    with _LOCK:
        zygotes = [z for z in _POOL.get(key, []) if not z.dead]
        idle = next((z for z in zygotes if not z.busy), None)
        try:
            if idle is None:  # its own CPU limit leaves every child's to the child
                _evict()
                if len(_USED) >= MAX_ZYGOTES:
                    return None  # all busy: a fresh process
                own = Limits(limits.memory_bytes, limits.file_size_bytes, 10**7, None)
                idle = Zygote(device, folder, own, env_keep)
                zygotes.append(idle)
            if idle in _USED:
                _USED.remove(idle)
            _USED.append(idle)
            _POOL[key] = zygotes
            staged = idle.stage(inputs)
            child = idle.spawn(staged, limits, fds)
        except OSError:
            if idle is not None:
                idle.close()
            return None
    return child, staged, idle.description


def close_all() -> None:
    with _LOCK:
        for zygotes in _POOL.values():
            for z in zygotes:
                z.close()
        _POOL.clear()
        _USED.clear()


atexit.register(close_all)
