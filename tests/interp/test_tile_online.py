"""tile_online run by the Triton interpreter: the split column softmax with its online pair kept
per element of the tile gives torch's softmax down the columns (a column of -inf, -inf in the
first segments only, the maximum in the last row), and the CPU gate accepts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from tests.conftest import in_gated_folder
from tests.interp.test_split_online import PROBLEM, _columns, assert_softmax_down
from tests.unit.rewrite.test_split_online import online, split
from tests.unit.rewrite.test_tile_online import forward

pytestmark = pytest.mark.interpreter


@pytest.mark.parametrize("segments", [1, 4])
def test_the_tile_online_walk_gives_the_softmax_down_the_columns(
    segments: int, tmp_path: Path
) -> None:
    x = _columns()
    x[5, 0] = x[6, 0] = x[:, 0].max()  # a tie for the column's maximum: both add exp(0)
    assert_softmax_down(forward(split(online(tiled=True), {"split": segments})), x, tmp_path)


def test_the_gate_accepts_the_tile_online_column_softmax() -> None:
    # One segment: the CPU regimes' columns (23 to 120 rows) then take several steps of the walk
    # each; split_online's default gives each segment of them a single step.
    source = forward(split(online(tiled=True), {"split": 1}))
    candidate = in_gated_folder(source, "tile_online_softmax.py")
    verdict = run_gate(PROBLEM / "problem.py", candidate, device="cpu",
                       regimes=["tiny", "ragged", "fp16"], config=GateConfig(cache=False))  # fmt: skip
    assert verdict.accepted, verdict.message
