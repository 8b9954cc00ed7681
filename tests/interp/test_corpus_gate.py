"""Every corpus kernel, expert and naive, passes the gate on its CPU regimes."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import Stage, Status, run_gate
from tests.conftest import in_gated_folder

pytestmark = pytest.mark.interpreter

KERNELS = Path(__file__).resolve().parents[2] / "src" / "klineage" / "kernels"
WORKLOADS = sorted(p.name for p in KERNELS.iterdir() if (p / "problem.py").exists())


def test_the_corpus_has_its_eleven_workloads() -> None:
    for name in ("matmul", "softmax", "rmsnorm", "layernorm", "attention", "cross_entropy",
                 "colsum", "cumsum", "transpose", "skinny_matmul", "bias_gelu"):  # fmt: skip
        assert name in WORKLOADS


@pytest.mark.parametrize("kind", ["expert", "naive"])
@pytest.mark.parametrize("workload", WORKLOADS)
def test_corpus_kernel_passes_the_gate_on_cpu(workload: str, kind: str) -> None:
    # A copy in the session's candidate folder, whose warm sandbox each workload's own folder
    # would start again (~4 s a call); the corpus kernels import nothing from their folder.
    kernel = in_gated_folder(
        (KERNELS / workload / f"{kind}.py").read_text(), f"corpus-{workload}-{kind}.py"
    )
    r = run_gate(
        KERNELS / workload / "problem.py",
        kernel,
        device="cpu",
        config=GateConfig(cache=False),
    )
    assert r.accepted, r.message
    correctness = r.stage(Stage.CORRECTNESS)
    assert correctness is not None
    verified = [o for o in correctness.regimes if o.status is Status.PASSED]
    assert len(verified) >= 2, "a workload needs at least two CPU regimes"


def test_the_gate_records_which_kernels_each_regime_launched() -> None:
    """RMSNorm's expert runs its single-block kernel on short rows and its looped kernel past
    8192 columns: the correctness stage says so per regime (skills use it to tell an effect
    from noise)."""
    from klineage.config import GateConfig
    from klineage.gate import Stage, run_gate
    from tests.conftest import KERNELS

    r = run_gate(KERNELS / "rmsnorm" / "problem.py", KERNELS / "rmsnorm" / "expert.py", device="cpu",
                 regimes=["tiny", "long_row"], config=GateConfig(cache=False))  # fmt: skip
    stage = r.stage(Stage.CORRECTNESS)
    assert r.accepted and stage is not None
    assert {o.regime: o.kernels for o in stage.regimes} == {
        "tiny": ["_rms_norm_fwd_kernel"],
        "long_row": ["_rms_norm_fwd_looped_kernel"],
    }
