"""tiled_transpose and block_scan on the experts' CPU walks' simplest kernels (a [1, 32] tile
through tl.trans; a [1, BLOCK_N] tile scanned along axis 1; the literal sources are the unit
tests'), through the CPU gate: one gate call each (~10 s here).

The transpose's odd regime is 100 x 70: at 64 x 64 that is 2 x 2 tiles, the last row and
column of tiles partial (both masks), in the walk's 1-D grid split by // and %. The cumsum's
tiny regime is 19 rows of 33 columns: at BLOCK_N = 16 each row is three blocks, the last with
one valid column, each block after the first starting from the [1, 1] carry of those before."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.rewrite import all_passes
from tests.conftest import KERNELS
from tests.unit.test_block_scan_row_tile import WALKED as CUMSUM_WALKED
from tests.unit.test_tiled_transpose_tile import WALKED as TRANSPOSE_WALKED

pytestmark = pytest.mark.interpreter


@pytest.mark.parametrize(
    ("pass_name", "workload", "source", "params", "regime", "written"),
    [
        ("tiled_transpose", "transpose", TRANSPOSE_WALKED, {}, "odd", "BLOCK_M=64,"),
        ("block_scan", "cumsum", CUMSUM_WALKED, {"block_n": 16}, "tiny", "carry += tl.sum("),
    ],
    ids=["transpose", "cumsum"],
)
def test_the_gate_accepts_the_walks_simplest_kernel_rewritten(
    tmp_path: Path,
    pass_name: str,
    workload: str,
    source: str,
    params: dict[str, int],
    regime: str,
    written: str,
) -> None:
    p = all_passes()[pass_name]
    (site,) = p.forward_sites(source)
    r = p.apply(source, site, params)
    assert r.applied and r.source is not None, r.reason
    assert written in r.source
    candidate = tmp_path / f"{workload}_{pass_name}.py"
    candidate.write_text(r.source, encoding="utf-8")
    verdict = run_gate(
        KERNELS / workload / "problem.py",
        candidate,
        device="cpu",
        regimes=[regime],
        config=GateConfig(cache=False),
    )
    assert verdict.accepted, verdict.message
