"""The GPU lock between gate calls (gate/gpulock.py): readers share it, a writer holds it alone,
a waiting writer keeps new readers out (the turnstile), and every wait lands in the clock.
Threads stand for processes: flock belongs to an open file description and each GpuLock opens
its own, so two GpuLocks in one process exclude each other as two processes would."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from klineage.gate.gpulock import GpuLock, LockMode, lock_paths
from klineage.gate.session import Clock, ProblemFault, _hold_lock_for

HOLD = 0.3  # seconds a holder keeps the lock; every wait below is measured against it


class Holder(threading.Thread):
    """Takes the lock in `mode` (recording when it got it), holds it until `done` is set."""

    def __init__(self, d: Path, mode: LockMode) -> None:
        super().__init__(daemon=True)
        self.clock = Clock(60.0)
        self.lock = GpuLock(self.clock, directory=d)
        self.mode = mode
        self.got = threading.Event()
        self.done = threading.Event()
        self.at = 0.0

    def run(self) -> None:
        self.lock.acquire(self.mode)
        self.at = time.monotonic()
        self.got.set()
        self.done.wait(10)
        self.lock.close()


def _turnstile_taken(d: Path) -> bool:
    fd = os.open(lock_paths(d)[1], os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_two_readers_hold_it_at_once(tmp_path: Path) -> None:
    a, b = Holder(tmp_path, LockMode.SHARED), Holder(tmp_path, LockMode.SHARED)
    a.start()
    assert a.got.wait(2)
    b.start()
    assert b.got.wait(2), "a second reader waited for the first"
    assert b.clock.waited < HOLD
    a.done.set(), b.done.set()


def test_a_writer_excludes_readers_and_the_wait_is_accounted(tmp_path: Path) -> None:
    w = Holder(tmp_path, LockMode.EXCLUSIVE)
    w.start()
    assert w.got.wait(2)
    r = Holder(tmp_path, LockMode.SHARED)
    r.start()
    assert not r.got.wait(HOLD), "a reader got in beside a writer"
    w.done.set()
    assert r.got.wait(2)
    assert r.clock.waited >= HOLD * 0.9 and r.clock.waited_exclusive == 0.0
    r.done.set()


def test_a_writer_waits_for_readers_and_its_wait_counts_as_exclusive(tmp_path: Path) -> None:
    r = Holder(tmp_path, LockMode.SHARED)
    r.start()
    assert r.got.wait(2)
    w = Holder(tmp_path, LockMode.EXCLUSIVE)
    w.start()
    assert not w.got.wait(HOLD), "a writer got in beside a reader"
    r.done.set()
    assert w.got.wait(2)
    assert w.clock.waited >= HOLD * 0.9
    assert w.clock.waited_exclusive == w.clock.waited
    w.done.set()


def test_a_waiting_writer_keeps_new_readers_out(tmp_path: Path) -> None:
    first = Holder(tmp_path, LockMode.SHARED)
    first.start()
    assert first.got.wait(2)
    writer = Holder(tmp_path, LockMode.EXCLUSIVE)
    writer.start()
    deadline = time.monotonic() + 2
    while not _turnstile_taken(tmp_path):  # the writer waits inside the turnstile
        assert time.monotonic() < deadline, "the waiting writer does not hold the turnstile"
        time.sleep(0.01)
    late = Holder(tmp_path, LockMode.SHARED)
    late.start()
    # Without the turnstile the late reader would share with the first and the writer starve.
    assert not late.got.wait(HOLD), "a reader overtook a waiting writer"
    first.done.set()
    assert writer.got.wait(2)
    assert not late.got.wait(0.1), "a reader got in beside the writer"
    writer.done.set()
    assert late.got.wait(2)
    assert writer.at < late.at
    late.done.set()


def test_changing_mode_and_closing_release_the_lock(tmp_path: Path) -> None:
    lock = GpuLock(Clock(60.0), directory=tmp_path)
    assert lock.acquire(LockMode.SHARED) < HOLD
    assert lock.acquire(LockMode.SHARED) == 0.0  # already held: no second trip
    lock.acquire(LockMode.EXCLUSIVE)
    assert lock.mode is LockMode.EXCLUSIVE
    lock.close()
    other = GpuLock(Clock(60.0), directory=tmp_path)
    assert other.acquire(LockMode.EXCLUSIVE) < HOLD
    other.close()


def test_shared_holds_one_call_and_leaves_a_held_mode_alone(tmp_path: Path) -> None:
    lock = GpuLock(Clock(60.0), directory=tmp_path)
    with lock.shared():
        assert lock.mode is LockMode.SHARED
    assert lock.mode is None  # released between calls: a writer gets in there
    w = Holder(tmp_path, LockMode.EXCLUSIVE)
    w.start()
    assert w.got.wait(2)
    w.done.set()
    w.join(2)
    lock.acquire(LockMode.EXCLUSIVE)
    with lock.shared():  # inside the timing section: runs under it, releases nothing
        assert lock.mode is LockMode.EXCLUSIVE
    assert lock.mode is LockMode.EXCLUSIVE
    r = Holder(tmp_path, LockMode.SHARED)
    r.start()
    assert not r.got.wait(HOLD), "shared() inside an exclusive hold let a reader in"
    lock.close()
    assert r.got.wait(2)
    r.done.set()


def test_every_hold_is_logged_with_its_mode_and_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "holds.jsonl"
    monkeypatch.setenv("KLINEAGE_GPU_LOCK_LOG", str(log))
    lock = GpuLock(Clock(60.0), directory=tmp_path)
    lock.what = "correctness"
    with lock.shared():
        time.sleep(0.05)
    lock.what = "profile"
    with lock.held(LockMode.EXCLUSIVE):
        pass
    lock.close()
    # (threads of earlier tests that release their locks now log too, with no work named)
    holds = [h for h in map(json.loads, log.read_text().splitlines()) if h["what"]]
    assert [(h["mode"], h["what"]) for h in holds] == [
        ("shared", "correctness"),
        ("exclusive", "profile"),
    ]
    assert holds[0]["held_s"] >= 0.04 and all(h["pid"] == os.getpid() for h in holds)


def test_an_inactive_lock_never_touches_files(tmp_path: Path) -> None:
    with GpuLock(Clock(60.0), active=False, directory=tmp_path) as lock:
        lock.acquire(LockMode.EXCLUSIVE)
    assert not any(tmp_path.iterdir())


# -- the reference process's lock, held by the parent -----------------------------------------------

CHILD = textwrap.dedent(
    """
    import os, sys, time
    from klineage.gate.gpulock import LockByProxy, LockMode
    lock = LockByProxy(int(sys.argv[1]), int(sys.argv[2]))
    with lock.held(LockMode.SHARED):
        pass
    with lock.held(LockMode.EXCLUSIVE):
        print("timing", flush=True)
        time.sleep(float(sys.argv[3]))
    fds = sorted(os.readlink(f"/proc/self/fd/{n}") for n in os.listdir("/proc/self/fd")
                 if os.path.exists(f"/proc/self/fd/{n}"))
    print(" ".join(fds))
    """
)


def _child(
    tmp_path: Path, hold: float, script: str = CHILD
) -> tuple[subprocess.Popen[str], int, int]:
    ask_r, ask_w = os.pipe()
    ok_r, ok_w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(ask_w), str(ok_r), str(hold)],
        pass_fds=(ask_w, ok_r), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(ask_w), os.close(ok_r)
    return proc, ask_r, ok_w


def test_the_parent_holds_the_lock_the_reference_asks_for(tmp_path: Path) -> None:
    blocker = Holder(tmp_path, LockMode.SHARED)  # another gate call, correctness under way
    blocker.start()
    assert blocker.got.wait(2)
    clock = Clock(30.0)
    parent = GpuLock(clock, directory=tmp_path)
    proc, ask_r, ok_w = _child(tmp_path, hold=1.0)  # long enough to probe on a loaded machine
    try:
        # While the child times, the parent holds the lock exclusive: a reader stays out.
        probe = Holder(tmp_path, LockMode.SHARED)
        result: list[bool] = []
        serve = threading.Thread(
            target=lambda: result.append(_hold_lock_for(proc, parent, ask_r, ok_w, clock, "p.py"))
        )
        serve.start()
        deadline = time.monotonic() + 5
        while not _turnstile_taken(tmp_path):  # the parent queues for exclusive on its behalf
            assert time.monotonic() < deadline, "the parent never queued for the child"
            time.sleep(0.01)
        time.sleep(HOLD)
        blocker.done.set()
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "timing"
        probe.start()
        assert not probe.got.wait(HOLD), "a reader got in while the reference timed"
        serve.join(10)
        assert result == [True]
        assert probe.got.wait(2)
        probe.done.set()
        # The wait for the other call's shared hold went to the clock, as exclusive.
        assert clock.waited >= HOLD * 0.5
        assert clock.waited - clock.waited_exclusive < 0.1
        # The child never had the lock's files open: only the parent's channel.
        fds = proc.stdout.readline()
        assert "klineage-gpu" not in fds, fds
    finally:
        parent.close()
        proc.kill()
        proc.wait()
        os.close(ask_r), os.close(ok_w)


def test_an_unknown_lock_request_is_the_problems_fault(tmp_path: Path) -> None:
    script = (
        "import os, sys; os.write(int(sys.argv[1]), b'everything\\n'); os.read(int(sys.argv[2]), 3)"
    )
    proc, ask_r, ok_w = _child(tmp_path, hold=0, script=script)
    lock = GpuLock(Clock(30.0), directory=tmp_path)
    try:
        with pytest.raises(ProblemFault, match="p.py: .*'everything' on the GPU lock channel"):
            _hold_lock_for(proc, lock, ask_r, ok_w, Clock(30.0), "p.py")
    finally:
        lock.close()
        proc.kill()
        proc.wait()
        os.close(ask_r), os.close(ok_w)


def test_the_candidates_process_inherits_no_lock_file(tmp_path: Path) -> None:
    """The harness is started like this (gate/session.py: Harness): Popen's close_fds, and the
    lock's files opened O_CLOEXEC, keep them out of every child, held or not."""
    with GpuLock(Clock(60.0), directory=tmp_path) as lock:
        lock.acquire(LockMode.EXCLUSIVE)
        r, w = os.pipe()
        out = subprocess.run(
            [sys.executable, "-c",
             "import os; print(' '.join(os.readlink(f'/proc/self/fd/{n}') for n in os.listdir('/proc/self/fd') if os.path.exists(f'/proc/self/fd/{n}')))"],
            pass_fds=(r, w), capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        os.close(r), os.close(w)
    assert "pipe:" in out and "klineage-gpu" not in out, out


class _Recorder:
    """A LockByProxy that writes down what the reference process asks, and what it did then."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.mode: LockMode | None = None

    def acquire(self, mode: LockMode) -> None:
        self.mode = mode
        self.log.append(mode.value)

    def release(self) -> None:
        self.mode = None
        self.log.append("release")

    @contextlib.contextmanager
    def held(self, mode: LockMode) -> Iterator[None]:
        self.acquire(mode)
        try:
            yield
        finally:
            self.release()


def test_the_reference_builds_shared_writes_unlocked_and_times_exclusive_per_regime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from klineage.config import GateConfig
    from klineage.gate import devtime, reference
    from klineage.gate.protocol import RefRequest
    from tests.conftest import PROBLEMS

    lock = _Recorder()

    class Baselines:  # stands for torch.compile's warm-up and the timing (no GPU here)
        def __init__(self, *args: object) -> None:
            lock.log.append(f"warm under {lock.mode}")

        def time(self) -> dict[str, float]:
            lock.log.append(f"time under {lock.mode}")
            return {"eager_ms": 1.0}

    save = reference._save

    def saved(path: Path, **payload: object) -> str:  # a case's file: written with no lock
        lock.log.append(f"write under {lock.mode}")
        return save(path, **payload)

    monkeypatch.setattr(reference, "_Baselines", Baselines)
    monkeypatch.setattr(reference, "_save", saved)
    monkeypatch.setattr(devtime, "empty_launch_ms", lambda: 0.5)
    out = tmp_path / "ref"
    out.mkdir()
    req = RefRequest(problem=str(PROBLEMS / "column_sum.py"), device="cpu", time_reference=True,
                     config=GateConfig(spin_up_ms=0))  # fmt: skip
    manifest = reference.run(req, out, lock)  # type: ignore[arg-type]
    # Per regime: its model and each trial's cases under the shared lock, released between
    # them; every file written under none; torch.compile's warm-up (seconds of host work) under
    # none; the timing exclusive.
    text = " ".join(x.replace(" ", "_") for x in lock.log)
    regime = (
        r"(shared release |write_under_None )+"
        rf"warm_under_None exclusive time_under_{LockMode.EXCLUSIVE} release"
    )
    assert re.fullmatch(rf"({regime} ?){{{len(manifest.regimes)}}}", text), text
    assert "write_under_shared" not in text and text.count("write_under_None") > len(
        manifest.regimes
    )
    assert all(r.eager_ms == 1.0 for r in manifest.regimes) and manifest.launch_ms == 0.5
