"""online_softmax run by the Triton interpreter: the merged walk's log-sum-exp equals torch's,
also where a row starts with blocks of -inf (the guard: without it the sum is NaN there), and the
CPU gate accepts the held-out column softmax with its walks merged (naive and column-tiled)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.optimize.materialize import mechanical
from tests.conftest import ROOT, interpreted
from tests.unit.rewrite.test_online_softmax import ROW_LSE, ROW_LSE_AFTER

pytestmark = pytest.mark.interpreter

GUARD = 'hi_ref = tl.where(hi_new == float("-inf"), 0.0, hi_new)'


def _rows() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = 4.0 * torch.randn(4, 70, generator=g)  # 70 = 4 blocks of 16 and a partial one
    x[1, :16] = float("-inf")  # a whole first block of -inf
    x[2, :40] = float("-inf")  # two and a half blocks
    x[3, 50] = 30.0  # the maximum rises late: the sum so far is rescaled
    return x


# The kernels run in a child with TRITON_INTERPRET=1 (set before triton is imported; this
# process may have imported it without), on _rows(), their outputs printed as JSON.
RUN = """
import importlib.util, json, math, sys
import torch
spec = importlib.util.spec_from_file_location("k", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
x = torch.load(sys.argv[2])
print(json.dumps([None if math.isnan(v) else v for v in m.launch(x).tolist()]))
"""


def _run(source: str, tmp_path: Path, name: str) -> torch.Tensor:
    path, rows = tmp_path / f"{name}.py", tmp_path / "rows.pt"
    path.write_text(source, encoding="utf-8")
    torch.save(_rows(), rows)
    values = interpreted(RUN, str(path), str(rows))
    return torch.tensor([math.nan if v is None else v for v in values])


def test_the_merged_walk_computes_log_sum_exp(tmp_path: Path) -> None:
    x = _rows()
    want = torch.logsumexp(x, dim=1)
    before = _run(ROW_LSE, tmp_path, "lse_two_walks")
    after = _run(ROW_LSE_AFTER, tmp_path, "lse_online")
    torch.testing.assert_close(before, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(after, want, rtol=1e-5, atol=1e-5)


def test_the_guard_is_what_keeps_a_leading_minus_inf_block_finite(tmp_path: Path) -> None:
    assert GUARD in ROW_LSE_AFTER
    unguarded = ROW_LSE_AFTER.replace(GUARD, "hi_ref = hi_new")
    out = _run(unguarded, tmp_path, "lse_unguarded")
    assert out[1:3].isnan().all() and not out[[0, 3]].isnan().any()


@pytest.mark.parametrize("before", [(), ("column_tiling",), ("column_tiling", "exp2_log2e")])
def test_the_gate_accepts_the_merged_column_softmax(
    before: tuple[str, ...], tmp_path: Path
) -> None:
    problem = ROOT / "src" / "klineage" / "heldout" / "column_softmax"
    source = (problem / "naive.py").read_text()
    for step in before:
        source = mechanical(source, step).source or ""
    merged = mechanical(source, "online_softmax")
    assert merged.source is not None, merged.reason
    candidate = tmp_path / "candidate.py"
    candidate.write_text(merged.source, encoding="utf-8")
    verdict = run_gate(
        problem / "problem.py",
        candidate,
        device="cpu",
        regimes=["tiny", "ragged", "fp16"],
        config=GateConfig(cache=False),
    )
    assert verdict.accepted, verdict.message


def test_the_walks_split_back_compute_log_sum_exp(tmp_path: Path) -> None:
    """Backward (the online walk split into a maximum walk and a sum walk against the final
    maximum's reference) keeps the meaning, -inf blocks included."""
    from tests.unit.rewrite.test_online_softmax import PASS

    (site,) = PASS.backward_sites(ROW_LSE_AFTER)
    split = PASS.simplify(ROW_LSE_AFTER, site).source
    assert split is not None
    x = _rows()
    out = _run(split, tmp_path, "lse_split_back")
    torch.testing.assert_close(out, torch.logsumexp(x, dim=1), rtol=1e-5, atol=1e-5)
