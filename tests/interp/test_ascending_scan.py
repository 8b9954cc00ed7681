"""ascending_scan's rewrite of the reverse cumsum's kernels passes the real gate in the
interpreter (its CPU regimes: a partial chunk, a ragged one, fp16, and rows split into
segments), and the same ascending loads without the scan turned around are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.gate import run_gate
from klineage.optimize.materialize import mechanical
from klineage.rewrite import all_passes

pytestmark = pytest.mark.interpreter

PROBLEM = (
    Path(__file__).resolve().parents[2] / "src" / "klineage" / "heldout" / "reverse_cumsum_rows"
)


@pytest.mark.parametrize("before", ["naive", "multi_row", "split_scan"])
def test_the_ascending_reverse_cumsum_is_accepted(tmp_path: Path, before: str) -> None:
    source = (PROBLEM / "naive.py").read_text()
    if before != "naive":
        p = all_passes()[before]
        made = p.apply(source, p.forward_sites(source)[0], {}).source
        assert made is not None
        source = made
    m = mechanical(source, "ascending_scan", {})
    assert m.source is not None, m.reason
    cand = tmp_path / "ascending.py"
    cand.write_text(m.source)
    result = run_gate(PROBLEM / "problem.py", cand, device="cpu")
    assert result.accepted, result.message
    if before == "split_scan":
        return
    forward = tmp_path / "forward.py"
    forward.write_text(m.source.replace(", reverse=True", ""))
    refused = run_gate(PROBLEM / "problem.py", forward, device="cpu", regimes=["ragged"])
    assert not refused.accepted
