"""tile_online run by the Triton interpreter: the split column softmax with its online pair kept
per element of the tile gives torch's softmax down the columns (a column of -inf, -inf in the
first segments only, the maximum in the last row), and the CPU gate accepts it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from klineage.config import GateConfig
from klineage.gate import run_gate
from tests.conftest import in_gated_folder, interpreted
from tests.interp.test_split_online import PROBLEM, RUN, _columns
from tests.unit.rewrite.test_split_online import online, split
from tests.unit.rewrite.test_tile_online import forward

pytestmark = pytest.mark.interpreter


@pytest.mark.parametrize("segments", [1, 4])
def test_the_tile_online_walk_gives_the_softmax_down_the_columns(
    segments: int, tmp_path: Path
) -> None:
    source = forward(split(online(tiled=True), {"split": segments}))
    path, data = tmp_path / "tile_online.py", tmp_path / "x.pt"
    path.write_text(source, encoding="utf-8")
    x = _columns()
    x[5, 0] = x[6, 0] = x[:, 0].max()  # a tie for the column's maximum: both add exp(0)
    torch.save(x, data)
    rows = interpreted(RUN, str(path), str(data))
    got = torch.tensor([[math.nan if v is None else v for v in row] for row in rows])
    want = torch.softmax(x.double(), dim=0).float()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert got[:, 1].isnan().all() and not got[:, [0, 2, 3, 4]].isnan().any()


def test_the_gate_accepts_the_tile_online_column_softmax() -> None:
    # One segment: the CPU regimes' columns (23 to 120 rows) then take several steps of the walk
    # each; split_online's default gives each segment of them a single step.
    source = forward(split(online(tiled=True), {"split": 1}))
    candidate = in_gated_folder(source, "tile_online_softmax.py")
    verdict = run_gate(PROBLEM / "problem.py", candidate, device="cpu",
                       regimes=["tiny", "ragged", "fp16"], config=GateConfig(cache=False))  # fmt: skip
    assert verdict.accepted, verdict.message
