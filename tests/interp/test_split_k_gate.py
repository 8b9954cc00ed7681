"""split_k on a held-out naive kernel, through the CPU gate: one gate call (~9 s here). The long-K
matmul's ragged regime (M=3, N=2, K=700 = 10 * 64 + 60) at SPLIT 4 gives each of the 6 outputs
four K chunks of 192 (three steps of 64 each), the last ragged with a masked tail, and the sum
kernel adds the four fp32 rows. It is no dearer than the tiny regime (8.8 s against 8.0 s),
whose K = 37 fits one step and so would leave three of the four chunks empty. (The gemv,
column-mean and tall-skinny naive kernels pass every CPU regime, rewritten, by hand.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.rewrite import all_passes
from tests.conftest import ROOT

pytestmark = pytest.mark.interpreter

HELDOUT = ROOT / "src" / "klineage" / "heldout"


def test_the_gate_accepts_a_split_k_long_k_matmul(tmp_path: Path) -> None:
    p = all_passes()["split_k"]
    source = (HELDOUT / "matmul_long_k_small_mn" / "naive.py").read_text(encoding="utf-8")
    (site,) = p.forward_sites(source)
    r = p.apply(source, site, {"split": 4})
    assert r.applied and r.source is not None, r.reason
    candidate = tmp_path / "matmul_long_k_split.py"
    candidate.write_text(r.source, encoding="utf-8")
    verdict = run_gate(
        HELDOUT / "matmul_long_k_small_mn" / "problem.py",
        candidate,
        device="cpu",
        regimes=["ragged"],
        config=GateConfig(cache=False),
    )
    assert verdict.accepted, verdict.message
