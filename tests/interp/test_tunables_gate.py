"""A lifted kernel (the tunables pass) passes the real gate in the interpreter: the autotune
table and the `lambda META` grid run, and every config is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.gate import run_gate
from klineage.rewrite import all_passes

pytestmark = pytest.mark.interpreter

GEMV = Path(__file__).resolve().parents[2] / "src" / "klineage" / "heldout" / "gemv"


def test_a_two_config_table_of_the_naive_gemv_is_accepted_under_each_config(tmp_path: Path) -> None:
    p = all_passes()["tunables"]
    source = (GEMV / "naive.py").read_text()
    [site] = p.forward_sites(source)
    configs = [
        {"ROWS": 64, "K_TILE": 128, "num_warps": 4},
        {"ROWS": 16, "K_TILE": 32, "num_warps": 2},
    ]
    r = p.apply(source, site, {"configs": configs})
    assert r.applied and r.source
    cand = tmp_path / "tuned.py"
    cand.write_text(r.source)
    result = run_gate(
        GEMV / "problem.py", cand, device="cpu", regimes=["cpu_fp32", "cpu_ragged_fp16"]
    )
    assert result.accepted, result.message
    correctness = next(s for s in result.stages if s.stage.value == "correctness")
    assert all(o.configs_checked == 2 for o in correctness.regimes)
    broken = r.source.replace(
        "sums += tl.sum(prod, axis=1)", "sums += tl.sum(prod, axis=1) * (K_TILE != 32)"
    )
    bad = tmp_path / "broken.py"
    bad.write_text(broken)
    rejected = run_gate(GEMV / "problem.py", bad, device="cpu", regimes=["cpu_fp32"])
    assert not rejected.accepted and "autotune config 2/2" in rejected.message


def test_the_naive_column_softmax_tuned_over_its_step_is_accepted(tmp_path: Path) -> None:
    """Its row stride scales both addresses; it was once taken for a pointer read and written,
    so the column softmax had no config space (2026-12-06)."""
    problem = GEMV.parent / "column_softmax"
    p = all_passes()["tunables"]
    [site] = p.forward_sites((problem / "naive.py").read_text())
    configs = [{"CHUNK": 16, "num_warps": 2}, {"CHUNK": 128, "num_warps": 8}]
    r = p.apply((problem / "naive.py").read_text(), site, {"configs": configs})
    assert r.applied and r.source
    cand = tmp_path / "tuned.py"
    cand.write_text(r.source)
    result = run_gate(problem / "problem.py", cand, device="cpu", regimes=["tiny", "ragged"])
    assert result.accepted, result.message
    correctness = next(s for s in result.stages if s.stage.value == "correctness")
    assert all(o.configs_checked == 2 for o in correctness.regimes)
