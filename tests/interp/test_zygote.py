"""The warm zygote (on unless KLINEAGE_ZYGOTE=0, gate/zygote.py): candidates of one folder are forked from
one sandboxed process that imported torch and triton once, and nothing one of them leaves
behind reaches the next: a background process it started is killed before the next runs, a
zygote it killed is replaced. The hostile and adversarial suites run on this path too (it is
the default at the bubblewrap level); the last test runs the fresh-process path."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate, zygote
from klineage.gate.sandbox import IsolationLevel, strongest_level
from tests.conftest import EXAMPLE

pytestmark = [
    pytest.mark.interpreter,
    pytest.mark.skipif(
        strongest_level() is not IsolationLevel.BWRAP, reason="the zygote runs under bubblewrap"
    ),
]

GOOD = (EXAMPLE / "candidate.py").read_text(encoding="utf-8")

# At import: a background process that, for 20 s, leaves marker files in the spool's writable
# tree (where the next candidate's outputs will be). The forward runs only while the markers
# are there, so the candidate is accepted only if its daemon ran (the test's positive control;
# it waits up to 5 s for the first marker: under CI's load the fork's child can start late, and
# the forward once checked before it had, 2026-12-06).
# libc's fork, not os.fork: the harness's guards end any child os.fork makes at once.
LEAVES_A_DAEMON = """
import ctypes, os, time
ROOT = os.path.dirname(os.path.dirname(os.getcwd()))
if ctypes.CDLL(None).fork() == 0:
    os.setsid()
    end, i = time.time() + 20, 0
    while time.time() < end:
        i += 1
        try:
            open(os.path.join(ROOT, f"alive-{i}"), "w").close()
        except OSError:
            pass
        time.sleep(0.01)
    os._exit(0)
"""

NEEDS_ITS_DAEMON = """
_Good = ModelNew


class ModelNew(_Good):
    def forward(self, x):
        # the forked daemon may not have been scheduled yet on a loaded machine: up to 5 s
        give_up = time.time() + 5
        while not any(n.startswith("alive") for n in os.listdir(ROOT)):
            if time.time() > give_up:
                raise RuntimeError("its daemon is not running")
            time.sleep(0.01)
        return super().forward(x)
"""

KILLS_ITS_PARENT = """
import os, signal
os.kill(os.getppid(), signal.SIGKILL)
"""


def _gate(candidate: Path, **kw: object):
    return run_gate(
        EXAMPLE / "problem.py",
        candidate,
        regimes=["tiny_rows"],
        config=GateConfig(cache=False),
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def warm(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KLINEAGE_ZYGOTE", "1")
    zygote.close_all()
    yield
    zygote.close_all()


def test_a_background_process_is_killed_before_the_next_candidate(
    tmp_path: Path, warm: None
) -> None:
    hostile, good = tmp_path / "hostile.py", tmp_path / "good.py"
    hostile.write_text(LEAVES_A_DAEMON + GOOD + NEEDS_ITS_DAEMON, encoding="utf-8")
    good.write_text(GOOD, encoding="utf-8")
    r = _gate(hostile, static_guards=False)
    assert r.accepted, r.message  # so its daemon ran beside its calls
    (z,) = [z for z in zygote._USED if not z.dead]
    time.sleep(0.5)  # a live daemon leaves a marker every 10 ms
    assert not [p.name for p in z.rw.rglob("alive-*")]
    after = _gate(good)
    assert after.accepted, after.message
    assert "forked from a warm zygote" in after.isolation and not list(z.rw.rglob("alive-*"))
    assert [z] == [z for z in zygote._USED if not z.dead]  # one zygote served both
    assert not list(z.ro.glob("req-*"))  # each call's linked inputs go when its child ends


def test_a_candidate_that_kills_the_zygote_is_rejected_and_the_next_starts_fresh(
    tmp_path: Path, warm: None
) -> None:
    hostile, good = tmp_path / "hostile.py", tmp_path / "good.py"
    hostile.write_text(KILLS_ITS_PARENT + GOOD, encoding="utf-8")
    good.write_text(GOOD, encoding="utf-8")
    r = _gate(hostile, static_guards=False)
    assert not r.accepted and r.fault is not None
    after = _gate(good)
    assert after.accepted, after.message


def test_with_the_zygote_off_each_candidate_gets_a_fresh_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KLINEAGE_ZYGOTE=0 (and any level but bubblewrap): the path the suites above run on when
    the zygote is on, exercised here so that CI keeps both."""
    monkeypatch.setenv("KLINEAGE_ZYGOTE", "0")
    zygote.close_all()
    wrong, good = tmp_path / "wrong.py", tmp_path / "good.py"
    wrong.write_text(GOOD + "\n_Good = ModelNew\n\n\nclass ModelNew(_Good):\n    def forward(self, x):\n"
                     "        return super().forward(x)[:, :-1]\n", encoding="utf-8")  # fmt: skip
    good.write_text(GOOD, encoding="utf-8")
    r = _gate(wrong, static_guards=False)
    assert not r.accepted and "zygote" not in r.isolation
    after = _gate(good)
    assert after.accepted, after.message
    assert "zygote" not in after.isolation and not zygote._USED
