"""GPU tier (opt-in): the gate on a real CUDA device. Run with `make gpu` or through the device tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import Stage, Status, run_gate
from tests.conftest import EXAMPLE

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parents[1] / "src" / "klineage" / "kernels"


def test_example_is_accepted_and_timed_against_eager_and_compile() -> None:
    r = run_gate(
        EXAMPLE / "problem.py",
        EXAMPLE / "candidate.py",
        device="cuda",
        config=GateConfig(cache=False),
    )
    assert r.accepted, r.message
    assert r.environment is not None and r.environment.gpu_name and r.environment.compute_capability
    prof = r.stage(Stage.PROFILE)
    assert prof is not None and prof.status is Status.PASSED
    large = prof.numbers.regimes["large"]
    assert large.kernel_ms > 0 and (large.eager_ms or 0) > 0 and (large.compile_ms or 0) > 0
    assert 0 < (large.pct_of_floor or 0) <= 100


@pytest.mark.parametrize(
    ("candidate", "words"),
    [("illegal_address", "illegal memory access"), ("out_of_memory", "out of memory")],
)
def test_device_faults_are_rejections_not_crashes(candidate: str, words: str) -> None:
    r = run_gate(
        EXAMPLE / "problem.py",
        HERE / "candidates" / f"{candidate}.py",
        device="cuda",
        config=GateConfig(cache=False, timeout_s=120),
    )
    assert not r.accepted
    assert r.failed_stage in (Stage.COMPILE, Stage.CORRECTNESS)
    assert words in r.message.lower() or "cuda error" in r.message.lower(), r.message


@pytest.mark.parametrize("kind", ["expert", "naive"])
@pytest.mark.parametrize(
    "workload", sorted(p.name for p in KERNELS.iterdir() if (p / "problem.py").exists())
)
def test_corpus_kernel_passes_the_gate_on_every_regime_on_gpu(workload: str, kind: str) -> None:
    r = run_gate(KERNELS / workload / "problem.py", KERNELS / workload / f"{kind}.py", device="cuda",
                 config=GateConfig(cache=False, timeout_s=600, allow_suspicious=True, profile_compile=False))  # fmt: skip
    assert r.accepted, r.message


def test_large_outputs_compare_on_the_gpu_as_on_the_host() -> None:
    """compare.DEVICE_MIN and up: the gate checks the common case on its GPU; the verdict and
    the errors are the host's, bit for bit (IEEE float32 steps and exact maxima)."""
    from klineage.gate.compare import DEVICE_MIN, compare_tensor

    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        want = torch.randn(3 * DEVICE_MIN + 5, generator=g).to(dtype)
        near = (want.float() * (1 + 3e-4)).to(dtype)
        far = near.clone()
        far[DEVICE_MIN + 1] += 1.0
        for got in (want.clone(), near, far):
            host = compare_tensor(got, want, 1e-2, "output")
            dev = compare_tensor(got, want, 1e-2, "output", device="cuda")
            assert (dev.ok, dev.message, dev.criterion) == (host.ok, host.message, host.criterion)
            assert (dev.max_abs_err, dev.max_rel_err) == (host.max_abs_err, host.max_rel_err)


def test_the_float64_criteria_on_the_gpu_decide_as_on_the_host() -> None:
    """A large float32 output closer to float64 than PyTorch's own (a scan in another order):
    decided on the GPU by the float64 criteria, with the host's verdict, note and errors."""
    from klineage.gate.compare import DEVICE_MIN, FLOAT64, compare_tensor

    g = torch.Generator().manual_seed(1)
    r = torch.randn(2 * DEVICE_MIN + 3, generator=g, dtype=torch.float64) * 50
    want = (r + (torch.rand(r.shape, generator=g, dtype=torch.float64) - 0.5) * 8e-3).float()
    got = (r + (torch.rand(r.shape, generator=g, dtype=torch.float64) - 0.5) * 4e-5).float()
    host = compare_tensor(got, want, 1e-4, "output", exact=r)
    dev = compare_tensor(got, want, 1e-4, "output", exact=r, device="cuda")
    assert host.ok and host.criterion == FLOAT64, host.message
    assert (dev.ok, dev.criterion, dev.note) == (host.ok, host.criterion, host.note)
    assert (dev.max_abs_err, dev.max_rel_err) == (host.max_abs_err, host.max_rel_err)
