"""multi_row on held-out naive kernels, through the CPU gate: rows per program that do not
divide the row count (masked tail rows), scalar per-row loads and stores, an elementwise
helper, a fixed ROWS. One small regime each: a gate call costs 10-18 s here. (All 11
one-row-per-program held-out kernels pass every CPU regime by hand; these two cover the
masked tail, the default and the fixed ROWS.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.rewrite import all_passes
from tests.conftest import ROOT

pytestmark = pytest.mark.interpreter

HELDOUT = ROOT / "src" / "klineage" / "heldout"


@pytest.mark.parametrize(
    ("problem", "params"),
    [
        # 7 rows of 1000 at ROWS = 4096 // 1024 = 4 (no program floor, which would make it 1):
        # two programs, the second with one tail row
        ("cross_entropy_label_smoothing", {"programs": 0}),
        # 37 rows at a fixed 32 rows per program: two programs, the second with 5 rows
        ("absmax_row_scale", {"rows": 32}),
    ],
)
def test_the_gate_accepts_multi_row_kernels(
    tmp_path: Path, problem: str, params: dict[str, int]
) -> None:
    p = all_passes()["multi_row"]
    source = (HELDOUT / problem / "naive.py").read_text(encoding="utf-8")
    (site,) = p.forward_sites(source)
    r = p.apply(source, site, params)
    assert r.applied and r.source is not None, r.reason
    candidate = tmp_path / f"{problem}_multi.py"
    candidate.write_text(r.source, encoding="utf-8")
    verdict = run_gate(
        HELDOUT / problem / "problem.py",
        candidate,
        device="cpu",
        regimes=["tiny"],
        config=GateConfig(cache=False),
    )
    assert verdict.accepted, verdict.message
