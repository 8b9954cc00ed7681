"""tile_accumulator run by the Triton interpreter: the column sum and the running maximum give
what torch gives with ragged tiles (and a row of -inf), and the CPU gate accepts the held-out
column mean and column max with their walks' tiles kept, after tiling and the split over rows."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.optimize.materialize import mechanical
from tests.conftest import ROOT, interpreted
from tests.unit.rewrite.test_tile_accumulator import COLUMN_SUM, ROW_MAX, forward

pytestmark = pytest.mark.interpreter

# The kernels run in a child with TRITON_INTERPRET=1 (set before triton is imported).
RUN = """
import importlib.util, json, sys
import torch
spec = importlib.util.spec_from_file_location("k", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
print(json.dumps(m.launch(torch.load(sys.argv[2])).tolist()))
"""


def _run(source: str, x: torch.Tensor, tmp_path: Path, name: str) -> torch.Tensor:
    path, data = tmp_path / f"{name}.py", tmp_path / f"{name}.pt"
    path.write_text(source, encoding="utf-8")
    torch.save(x, data)
    return torch.tensor(interpreted(RUN, str(path), str(data)))


def test_the_column_sum_with_a_tile_accumulator(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(45, 37, generator=g)  # 45 = 5 steps of 8 and a ragged one; 37 columns
    want = x.sum(dim=0)
    before = _run(COLUMN_SUM, x, tmp_path, "sum_per_step")
    after = _run(forward(COLUMN_SUM), x, tmp_path, "sum_tile")
    torch.testing.assert_close(before, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(after, want, rtol=1e-5, atol=1e-5)


def test_the_running_maximum_with_a_tile_accumulator(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 70, generator=g)
    x[1] = float("-inf")  # a row of -inf: the identity stays the answer
    x[2, 69] = 50.0  # the maximum in the ragged last block
    got = _run(forward(ROW_MAX), x, tmp_path, "max_tile")
    assert torch.equal(got, x.max(dim=1).values)


@pytest.mark.parametrize("problem", ["column_mean_tall", "column_max_bf16"])
def test_the_gate_accepts_the_tiled_split_column_reduction_with_a_tile_accumulator(
    problem: str, tmp_path: Path
) -> None:
    where = ROOT / "src" / "klineage" / "heldout" / problem
    source = (where / "naive.py").read_text()
    source = mechanical(source, "column_tiling", then=[("split_k", {})]).source or ""
    made = mechanical(source, "tile_accumulator")
    assert made.source is not None and "_tile = tl.full((" in made.source, made.reason
    candidate = tmp_path / "candidate.py"
    candidate.write_text(made.source, encoding="utf-8")
    regimes = {"column_mean_tall": ["tiny", "tall_fp32", "fp16"]}.get(problem)
    verdict = run_gate(where / "problem.py", candidate, device="cpu", regimes=regimes,
                       config=GateConfig(cache=False))  # fmt: skip
    assert verdict.accepted, verdict.message
