"""multi_row on a row scan, through the CPU gate: the held-out reverse cumsum's naive kernel (one
program per row, the row walked from its end in 64-column chunks with a carried total) packed
ROWS rows a program, its carried total one per row. ROWS 2 leaves a masked tail row on every
CPU regime (3, 4 and 5 rows: the ragged one's 300 columns end on a partial chunk); a broken
carry (the total not restarted per row) is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.gate.records import Stage
from tests.conftest import ROOT
from tests.unit.test_dispatch import _multi_row  # (naive, packed ROWS rows a program)

pytestmark = pytest.mark.interpreter

PROBLEM = ROOT / "src" / "klineage" / "heldout" / "reverse_cumsum_rows"


def _packed(rows: int) -> str:
    return _multi_row("reverse_cumsum_rows", rows)[1]


def _gate(tmp_path: Path, source: str) -> object:
    candidate = tmp_path / "candidate.py"
    candidate.write_text(source, encoding="utf-8")
    return run_gate(
        PROBLEM / "problem.py",
        candidate,
        device="cpu",
        regimes=["tiny", "ragged", "fp16"],
        config=GateConfig(cache=False),
    )


def test_the_gate_accepts_the_multi_row_reverse_cumsum(tmp_path: Path) -> None:
    verdict = _gate(tmp_path, _packed(2))
    assert verdict.accepted, verdict.message
    # the correctness stage says where its seconds went (checker.py Checked.spent)
    stage = next(s for s in verdict.stages if s.stage is Stage.CORRECTNESS)
    parts = stage.numbers.correctness_s
    assert parts is not None and set(parts) == {"harness", "forward", "read", "expected", "compare"}
    assert parts["harness"] >= parts["forward"] > 0.0
    assert parts["harness"] <= stage.seconds + 0.05  # the compile stage's first call not counted
    assert f"harness {parts['harness']:.1f} s" in stage.message


def test_the_gate_refuses_a_total_carried_across_the_rows(tmp_path: Path) -> None:
    source = _packed(2)
    # every row starts from the first row's total: wrong for every row but the first
    good = "carried = tl.full((ROWS, 1), 0.0, tl.float32)"
    assert good in source
    broken = source.replace(
        "carried += tl.sum(v, axis=1, keep_dims=True)",
        "carried += tl.sum(tl.sum(v, axis=1, keep_dims=True), axis=0, keep_dims=True)",
    )
    assert broken != source
    verdict = _gate(tmp_path, broken)
    assert not verdict.accepted
    assert verdict.message.startswith("correctness"), verdict.message
