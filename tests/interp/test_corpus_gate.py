"""Every corpus kernel, expert and naive, passes the gate on its CPU regimes."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import Stage, Status, run_gate

pytestmark = pytest.mark.interpreter

KERNELS = Path(__file__).resolve().parents[2] / "src" / "klineage" / "kernels"
WORKLOADS = sorted(p.name for p in KERNELS.iterdir() if (p / "problem.py").exists())


def test_the_corpus_has_the_five_workloads() -> None:
    for name in ("matmul", "softmax", "rmsnorm", "layernorm", "attention", "cross_entropy"):
        assert name in WORKLOADS


@pytest.mark.parametrize("kind", ["expert", "naive"])
@pytest.mark.parametrize("workload", WORKLOADS)
def test_corpus_kernel_passes_the_gate_on_cpu(workload: str, kind: str) -> None:
    r = run_gate(
        KERNELS / workload / "problem.py",
        KERNELS / workload / f"{kind}.py",
        device="cpu",
        config=GateConfig(cache=False),
    )
    assert r.accepted, r.message
    correctness = r.stage(Stage.CORRECTNESS)
    assert correctness is not None
    verified = [o for o in correctness.regimes if o.status is Status.PASSED]
    assert len(verified) >= 2, "a workload needs at least two CPU regimes"
