"""block_scan on the cumsum corpus naive, through the CPU gate: one gate call (~10-20 s here).
The tiny regime has 19 rows of 33 columns; at a fixed BLOCK_N of 16 each row is three blocks,
the last with one valid column and 15 masked lanes, and every block after the first starts
from the carried fp32 sum of the blocks before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.rewrite import all_passes
from tests.conftest import KERNELS

pytestmark = pytest.mark.interpreter


def test_the_gate_accepts_the_cumsum_naive_as_a_block_scan(tmp_path: Path) -> None:
    p = all_passes()["block_scan"]
    source = (KERNELS / "cumsum" / "naive.py").read_text(encoding="utf-8")
    (site,) = p.forward_sites(source)
    r = p.apply(source, site, {"block_n": 16})
    assert r.applied and r.source is not None, r.reason
    assert "carry += tl.sum(x, axis=0)" in r.source
    candidate = tmp_path / "cumsum_block_scan.py"
    candidate.write_text(r.source, encoding="utf-8")
    verdict = run_gate(
        KERNELS / "cumsum" / "problem.py",
        candidate,
        device="cpu",
        regimes=["tiny"],
        config=GateConfig(cache=False),
    )
    assert verdict.accepted, verdict.message
