"""column_tiling on a held-out naive kernel, through the CPU gate: one gate call (~10-25 s
here). The column max's tiny regime has 40 columns; at a fixed BLOCK_N of 16 that is three
programs, the last with 8 masked tail columns, a while loop over row blocks and an accumulator
started from a literal (-inf). (The colsum naive and the column mean, max and softmax held-out
kernels pass every CPU regime at the default BLOCK_N by hand.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.rewrite import all_passes
from tests.conftest import ROOT

pytestmark = pytest.mark.interpreter

HELDOUT = ROOT / "src" / "klineage" / "heldout"


def test_the_gate_accepts_a_column_tiled_column_max(tmp_path: Path) -> None:
    p = all_passes()["column_tiling"]
    source = (HELDOUT / "column_max_bf16" / "naive.py").read_text(encoding="utf-8")
    (site,) = p.forward_sites(source)
    r = p.apply(source, site, {"block_n": 16})
    assert r.applied and r.source is not None, r.reason
    candidate = tmp_path / "column_max_tiled.py"
    candidate.write_text(r.source, encoding="utf-8")
    verdict = run_gate(
        HELDOUT / "column_max_bf16" / "problem.py",
        candidate,
        device="cpu",
        regimes=["tiny"],
        config=GateConfig(cache=False),
    )
    assert verdict.accepted, verdict.message


@pytest.mark.parametrize("problem", ["column_max_bf16", "column_mean_tall"])
def test_the_gate_accepts_column_tiling_then_split_k_in_one_candidate(
    tmp_path: Path, problem: str
) -> None:
    # The candidate optimize proposes when the tiling alone was correct but not faster (few
    # column programs): a split over rows on the tiled kernel, its partials combined by a
    # second kernel (a max, or a sum scaled to the mean).
    from klineage.optimize.materialize import mechanical

    source = (HELDOUT / problem / "naive.py").read_text(encoding="utf-8")
    m = mechanical(source, "column_tiling", {"block_n": 16}, then=[("split_k", {})])
    assert m.source is not None and "then split_k" in m.reason, m.reason
    assert "tl.program_id(1)" in m.source and "num_programs(1)" in m.source
    candidate = tmp_path / f"{problem}_tiled_split.py"
    candidate.write_text(m.source, encoding="utf-8")
    verdict = run_gate(
        HELDOUT / problem / "problem.py",
        candidate,
        device="cpu",
        regimes=["tiny"],
        config=GateConfig(cache=False),
    )
    assert verdict.accepted, verdict.message
