"""GPU tier (opt-in): optimize measures on the device, and the GPU lock lets two gate calls
share a GPU without overlapping their timing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.optimize import Settings, optimize
from klineage.skills import read_json
from klineage.skills.library import shipped_library_path
from klineage.store import open_store
from tests.conftest import EXAMPLE, KERNELS

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_optimize_on_the_gpu_keeps_only_measured_gains(tmp_path: Path) -> None:
    store = open_store(tmp_path / "k.db")
    s = optimize(KERNELS / "softmax" / "problem.py", KERNELS / "softmax" / "naive.py", store=store, device="cuda",
                 skills=read_json(shipped_library_path()), settings=Settings(budget=4, regimes=["odd", "large", "tiny_rows_gpu"]),
                 config=GateConfig(cache=False, warmup_ms=10, rep_ms=40, profile_compile=False))  # fmt: skip
    assert (
        s["measured"]
        and s["label"] == "measured"
        and set(s["regimes"]) == {"large", "tiny_rows_gpu"}
    )
    for t in store.trials(s["run_id"]):
        if t.kept:
            assert t.accepted and t.speedup is not None and t.speedup >= 1.03
    assert s["speedup"] == pytest.approx(
        (s["regimes"]["large"]["speedup"] * s["regimes"]["tiny_rows_gpu"]["speedup"]) ** 0.5
    )


def test_two_gate_calls_on_one_gpu_both_finish_under_the_lock() -> None:
    results = []

    def gate() -> None:
        results.append(run_gate(EXAMPLE / "problem.py", EXAMPLE / "candidate.py", device="cuda",
                                config=GateConfig(cache=False, profile_compile=False)))  # fmt: skip

    threads = [threading.Thread(target=gate) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert len(results) == 2 and all(r.accepted for r in results)
