"""tiled_transpose on the held-out batched transpose's naive kernel, through the CPU gate: one
gate call (~10 s here). Its tiny regime is 2 matrices of 5 x 7; at 4 x 4 tiles that is 2 x 2
tiles a matrix, the last row and column of tiles partial (masks on both dimensions), the batch
on grid axis 2. (The corpus transpose naive and a row-in-column-chunks kernel pass every CPU
regime of kernels/transpose at 64 x 64 and at other tiles by hand; so does this one.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.rewrite import all_passes
from tests.conftest import ROOT

pytestmark = pytest.mark.interpreter

HELDOUT = ROOT / "src" / "klineage" / "heldout"


def test_the_gate_accepts_a_tiled_batched_transpose(tmp_path: Path) -> None:
    p = all_passes()["tiled_transpose"]
    source = (HELDOUT / "batched_transpose_last2" / "naive.py").read_text(encoding="utf-8")
    (site,) = p.forward_sites(source)
    r = p.apply(source, site, {"block_m": 4, "block_n": 4})
    assert r.applied and r.source is not None, r.reason
    assert "tl.program_id(2)" in r.source
    candidate = tmp_path / "batched_transpose_tiled.py"
    candidate.write_text(r.source, encoding="utf-8")
    verdict = run_gate(
        HELDOUT / "batched_transpose_last2" / "problem.py",
        candidate,
        device="cpu",
        regimes=["tiny"],
        config=GateConfig(cache=False),
    )
    assert verdict.accepted, verdict.message
