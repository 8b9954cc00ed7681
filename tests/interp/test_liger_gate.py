"""A real library kernel through the whole CPU gate: Liger-Kernel's softmax, read at run time.

Of the five Liger ops the static guards accept (tests/unit/test_liger_static_guards.py), only
softmax runs under Triton's CPU interpreter: layer_norm, rms_norm and swiglu call `.to()` on a
scalar kernel argument (a Python float there, a tensor when compiled) and geglu fails inside its
kernel, so those are for the GPU. One small regime keeps this cheap.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import Stage, Status, run_gate
from tests.conftest import KERNELS
from tests.liger_ops import liger_candidate

pytestmark = pytest.mark.interpreter


def test_the_gate_accepts_liger_softmax_unchanged(tmp_path: Path) -> None:
    candidate = tmp_path / "liger_softmax.py"
    candidate.write_text(liger_candidate("softmax"), encoding="utf-8")
    r = run_gate(
        KERNELS / "softmax" / "problem.py",
        candidate,
        device="cpu",
        regimes=["tiny_rows"],
        config=GateConfig(cache=False),
    )
    assert r.accepted, r.message
    correctness = r.stage(Stage.CORRECTNESS)
    assert correctness is not None
    (outcome,) = correctness.regimes
    assert outcome.status is Status.PASSED
    assert outcome.kernels == ["_softmax_single_block_forward_kernel"]
