"""The disk under a gate call's work folder: a full disk is the machine's fault, and live calls
take turns to start writing their cases.

A gate call on a GPU holds its regimes' cases on disk (inputs, expected outputs, float64
evaluations, the candidate's outputs: GBs for held-out regimes of 0.05-0.7 GiB of inputs). Under
a dozen parallel calls the disk filled up (docs/benchmarks.md, "Under load"): each had checked
for free space on its own, all at once. So a call starts writing only when the disk has
START_FREE_BYTES free plus WRITER_BYTES for every other live call already writing, checked and
marked under one file lock: the others' marks are a `.writing` file in their work folders
(`kl-*` beside this one, gate/runner.py), which go when the folders do, and a mark whose process
is gone is not counted. The wait is the machine's, charged to nobody (lock_wait_s); after
DISK_WAIT_S the call goes ahead anyway.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from klineage.errors import MachineError

# Below this much free space where the gate writes its cases, a failure is the disk's.
MIN_FREE_BYTES = 2 << 30
START_FREE_BYTES = 12 << 30
# Room kept for each other live call that is writing: what a held-out GPU call still adds after
# it starts (a few GB on the H200, 2026-12-02).
WRITER_BYTES = 3 << 30
DISK_WAIT_S = 300.0
MARK = ".writing"


def machine_fault(workdir: Path, text: str) -> MachineError | None:
    """A MachineError when the disk under `workdir` is (nearly) full: the reference's or the
    harness's torch.save failing there is no fault of the problem or the candidate."""
    try:
        free = shutil.disk_usage(workdir).free
    except OSError:
        return None
    if free >= MIN_FREE_BYTES and "No space left on device" not in text:
        return None
    return MachineError(
        f"the disk holding {workdir.parent} is full ({free / 2**30:.1f} GiB free) and a gate "
        f"process failed writing its tensors ({text.splitlines()[0][:200] if text else 'no message'}): "
        "no verdict on the problem or the candidate. Run fewer gate calls at once (each holds its "
        "regimes' cases on disk), or point TMPDIR at a larger disk."
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: it exists
    return True


def live_writers(workdir: Path) -> int:
    """Other gate calls beside `workdir` whose mark says they are writing, their process alive."""
    n = 0
    for d in workdir.parent.glob("kl-*"):
        if d == workdir:
            continue
        with contextlib.suppress(OSError, ValueError):
            if _alive(int((d / MARK).read_text(encoding="utf-8"))):
                n += 1
    return n


@contextlib.contextmanager
def _locked(workdir: Path) -> Any:
    import fcntl

    try:
        f = open(workdir.parent / ".klineage-disk.lock", "a")  # noqa: SIM115
    except OSError:
        yield  # no lock to take (a read-only parent): each call checks on its own, as before
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def wait_for_disk(workdir: Path, event: Callable[..., None]) -> float:
    """Seconds waited for this call's turn to write under `workdir` (0 when it was free); the
    turn is marked in `workdir` and ends with it."""
    t0 = time.monotonic()
    told = False
    while time.monotonic() - t0 < DISK_WAIT_S:
        with _locked(workdir):
            try:
                need = START_FREE_BYTES + WRITER_BYTES * live_writers(workdir)
                ok = shutil.disk_usage(workdir).free >= need
            except OSError:
                ok = True  # nothing to measure by: go ahead
            if ok:
                _mark(workdir)
                return time.monotonic() - t0
        if not told:
            event("progress", detail=f"waiting for free disk under {workdir.parent}")
            told = True
        time.sleep(1.0)
    _mark(workdir)
    return time.monotonic() - t0


def _mark(workdir: Path) -> None:
    with contextlib.suppress(OSError):
        (workdir / MARK).write_text(str(os.getpid()), encoding="utf-8")
