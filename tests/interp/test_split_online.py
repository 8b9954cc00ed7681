"""split_online run by the Triton interpreter: the column softmax split over row segments gives
torch's softmax down the columns (ragged segments, a column of -inf, a column whose maximum is in
its last segment), and the CPU gate accepts it after the column tiling and the online walk."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from klineage.config import GateConfig
from klineage.gate import run_gate
from tests.conftest import ROOT, interpreted
from tests.unit.rewrite.test_split_online import online, split

pytestmark = pytest.mark.interpreter
PROBLEM = ROOT / "src" / "klineage" / "heldout" / "column_softmax"

# The kernels run in a child with TRITON_INTERPRET=1 (set before triton is imported).
RUN = """
import importlib.util, json, math, sys
import torch
spec = importlib.util.spec_from_file_location("k", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
y = m.ModelNew()(torch.load(sys.argv[2]))
print(json.dumps([[None if math.isnan(v) else v for v in row] for row in y.tolist()]))
"""


def _columns() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = 3.0 * torch.randn(300, 5, generator=g)  # 300 rows: 10 chunks of 32, the last ragged
    x[:, 1] = float("-inf")  # a column of -inf: NaN, as torch gives
    x[:200, 2] = float("-inf")  # -inf in the first segments only
    x[299, 3] = 40.0  # the maximum in the last segment: every other partial is rescaled
    return x


def assert_softmax_down(source: str, x: torch.Tensor, tmp_path: Path) -> None:
    """The kernel file `source` run on x by the interpreter gives torch's softmax down x's
    columns (in float64, rounded), NaN in column 1 only (_columns' column of -inf)."""
    path, data = tmp_path / "kernel.py", tmp_path / "x.pt"
    path.write_text(source, encoding="utf-8")
    torch.save(x, data)
    rows = interpreted(RUN, str(path), str(data))
    got = torch.tensor([[math.nan if v is None else v for v in row] for row in rows])
    want = torch.softmax(x.double(), dim=0).float()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert got[:, 1].isnan().all() and not got[:, [0, 2, 3, 4]].isnan().any()


@pytest.mark.parametrize("tiled", [False, True])
def test_the_split_walks_give_the_softmax_down_the_columns(tiled: bool, tmp_path: Path) -> None:
    assert_softmax_down(split(online(tiled), {"split": 4}), _columns(), tmp_path)


def test_the_gate_accepts_the_split_column_softmax(tmp_path: Path) -> None:
    candidate = tmp_path / "candidate.py"
    candidate.write_text(split(online(tiled=True)), encoding="utf-8")
    verdict = run_gate(PROBLEM / "problem.py", candidate, device="cpu",
                       regimes=["tiny", "ragged", "fp16"], config=GateConfig(cache=False))  # fmt: skip
    assert verdict.accepted, verdict.message
