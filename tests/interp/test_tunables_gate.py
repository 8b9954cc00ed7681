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
