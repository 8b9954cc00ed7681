"""GPU tier (opt-in): the checks that only a GPU has. A forward whose result does not come from
its device work fails the CUDA-graph replay; a compute kernel that is not the candidate's Triton
code fails the device kernel list, even when the in-process monitors were blinded."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import Stage, run_gate
from tests.conftest import EXAMPLE

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

HERE = Path(__file__).resolve().parent
CONFIG = GateConfig(cache=False, timeout_s=300, profile_compile=False)


def test_a_forward_that_skips_work_under_capture_fails_the_graph_replay() -> None:
    r = run_gate(EXAMPLE / "problem.py", HERE / "candidates" / "capture_detect.py", device="cuda",
                 regimes=["tiny_rows", "large"], config=CONFIG)  # fmt: skip
    assert not r.accepted
    assert r.failed_stage is Stage.CORRECTNESS and "CUDA-graph replay" in r.message, r.message


def test_blinded_monitors_do_not_hide_a_foreign_device_kernel() -> None:
    r = run_gate(EXAMPLE / "problem.py", HERE / "candidates" / "pause_counter.py", device="cuda",
                 regimes=["tiny_rows", "large"], config=CONFIG, static_guards=False)  # fmt: skip
    assert not r.accepted
    assert r.failed_stage is Stage.RUNTIME_GUARDS and "device kernels" in r.message, r.message


def test_the_example_passes_replay_and_kernel_list() -> None:
    r = run_gate(EXAMPLE / "problem.py", EXAMPLE / "candidate.py", device="cuda",
                 regimes=["tiny_rows", "large"], config=CONFIG)  # fmt: skip
    assert r.accepted, r.message
    assert r.isolation and r.calls_checked > 10
