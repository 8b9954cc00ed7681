"""Live gate calls take turns to write their cases (gate/disk.py): a call needs START_FREE_BYTES
free plus WRITER_BYTES for each other live writer, whose mark is a `.writing` file in its work
folder; a mark whose process is gone does not count, and a call that gets its turn marks its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest

from klineage.gate import disk

Usage = namedtuple("Usage", "total used free")


def _folder(root: Path, name: str, pid: int | None) -> Path:
    d = root / name
    d.mkdir()
    if pid is not None:
        (d / disk.MARK).write_text(str(pid), encoding="utf-8")
    return d


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_live_writers_count_only_marked_folders_of_live_processes(tmp_path: Path) -> None:
    me = _folder(tmp_path, "kl-me", None)
    _folder(tmp_path, "kl-live", os.getpid())
    _folder(tmp_path, "kl-gone", _dead_pid())
    _folder(tmp_path, "kl-idle", None)  # not writing yet
    _folder(tmp_path, "other-live", os.getpid())  # not a gate work folder
    assert disk.live_writers(me) == 1


def test_a_call_waits_for_room_for_the_other_writers_then_marks_its_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    me = _folder(tmp_path, "kl-me", None)
    others = [_folder(tmp_path, f"kl-{k}", os.getpid()) for k in range(3)]
    free = disk.START_FREE_BYTES + 2 * disk.WRITER_BYTES  # room for two others, not three
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(1 << 40, 0, free))
    monkeypatch.setattr(disk, "DISK_WAIT_S", 3.0)
    slept: list[float] = []

    def sleep(s: float) -> None:  # one other call ends while this one waits
        slept.append(s)
        shutil.rmtree(others.pop())

    monkeypatch.setattr(disk.time, "sleep", sleep)
    events: list[dict] = []
    waited = disk.wait_for_disk(me, lambda kind, **d: events.append({"kind": kind, **d}))
    assert len(slept) == 1 and waited >= 0
    assert events and "waiting for free disk" in events[0]["detail"]
    assert (me / disk.MARK).read_text(encoding="utf-8") == str(os.getpid())


def test_a_free_disk_gives_the_turn_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    me = _folder(tmp_path, "kl-me", None)
    _folder(tmp_path, "kl-other", os.getpid())
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(1 << 40, 0, 1 << 40))
    monkeypatch.setattr(disk.time, "sleep", lambda s: pytest.fail("waited on a free disk"))
    events: list[dict] = []
    assert disk.wait_for_disk(me, lambda kind, **d: events.append(d)) < 1.0
    assert not events and (me / disk.MARK).exists()
