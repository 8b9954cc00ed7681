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
    _accepted_with_each_config(problem, tmp_path / "tuned.py", r.source, ["tiny", "ragged"], 2)


def _accepted_with_each_config(
    problem: Path, cand: Path, source: str, regimes: list[str], configs: int
) -> None:
    """The gate accepts `source` (written to cand) on the regimes, every config checked."""
    cand.write_text(source)
    result = run_gate(problem / "problem.py", cand, device="cpu", regimes=regimes)
    assert result.accepted, result.message
    correctness = next(s for s in result.stages if s.stage.value == "correctness")
    assert all(o.configs_checked == configs for o in correctness.regimes)


def test_the_reverse_cumsums_rows_and_chunk_tabled_together_pass_the_gate(tmp_path: Path) -> None:
    """multi_row's launcher computes the rows a program; the table lifts them beside the
    chunk, and the grid follows META["ROWS"]: every config's programs cover every row."""
    problem = GEMV.parent / "reverse_cumsum_rows"
    passes = all_passes()
    source = (problem / "naive.py").read_text()
    rows = passes["multi_row"]
    made = rows.apply(source, rows.forward_sites(source)[0], {})
    assert made.applied and made.source
    p = passes["tunables"]
    [site] = p.forward_sites(made.source)
    configs = [{"CHUNK": 256, "ROWS": 16, "num_warps": 4}, {"CHUNK": 32, "ROWS": 8, "num_warps": 2}]
    r = p.apply(made.source, site, {"configs": configs})
    assert r.applied and r.source and "ROWS = min(" not in r.source
    _accepted_with_each_config(problem, tmp_path / "tuned.py", r.source, ["ragged", "fp16"], 2)
    # A grid that forgets the last partial program of rows leaves rows unwritten.
    short = tmp_path / "short.py"
    short.write_text(r.source.replace('triton.cdiv(rows, META["ROWS"])', 'rows // META["ROWS"]'))
    rejected = run_gate(problem / "problem.py", short, device="cpu", regimes=["ragged", "fp16"])
    assert not rejected.accepted
