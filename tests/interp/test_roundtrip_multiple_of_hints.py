"""multiple_of_hints on the CPU gate: a matmul site simplified and restored, an unseen kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, MATMUL_ROUND_TRIP_REGIMES, UNSEEN
from tests.conftest import assert_gate_accepts as _accepted

pytestmark = pytest.mark.interpreter


def test_matmul_offsets_hint_round_trips_through_the_gate(tmp_path: Path) -> None:
    p = get_pass("multiple_of_hints")
    problem = KERNELS / "matmul" / "problem.py"
    expert = (KERNELS / "matmul" / "expert.py").read_text()
    sites = p.backward_sites(expert)
    assert len(sites) == 2
    site = sites[0]  # offs_am
    assert site.params["hints"] == [
        ["max_contiguous", "BLOCK_SIZE_M"],
        ["multiple_of", "BLOCK_SIZE_M"],
    ]
    simplified = p.simplify(expert, site)
    assert simplified.applied and simplified.source is not None
    assert "offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)\n" in simplified.source
    # The hints wrap offs_am: MATMUL_ROUND_TRIP_REGIMES run every config and a second row tile.
    _accepted(problem, simplified.source, tmp_path / "backward.py", MATMUL_ROUND_TRIP_REGIMES)

    # Forward into a kernel with no hints left at all.
    source = p.simplify(simplified.source, p.backward_sites(simplified.source)[0]).source
    assert source is not None and "max_contiguous" not in source
    fwd = next(s for s in p.forward_sites(source) if s.line == site.line)
    restored = p.apply(source, fwd, site.params)
    assert restored.applied and restored.source is not None
    assert restored.source.count("tl.max_contiguous(") == 1
    _accepted(problem, restored.source, tmp_path / "forward.py", MATMUL_ROUND_TRIP_REGIMES)


def test_unseen_tiled_matmul_is_found_and_stays_correct(tmp_path: Path) -> None:
    p = get_pass("multiple_of_hints")
    source = (UNSEEN / "multiple_of_hints_tiled_mm.py").read_text()
    sites = p.backward_sites(source)
    assert [len(s.params["hints"]) for s in sites] == [2, 1, 1]
    assert sites[2].params["statement"] == "k0 = T.multiple_of(k0, TK)"
    while rest := p.backward_sites(source):
        step = p.simplify(source, rest[0])
        assert step.applied and step.source is not None
        source = step.source
    assert "T.multiple_of(" not in source and "T.max_contiguous(" not in source
    _accepted(KERNELS / "matmul" / "problem.py", source, tmp_path / "k.py")
