"""num_warps on the CPU gate: a launch site simplified and restored, and an unseen kernel.

On the CPU the interpreter ignores num_warps, so these check that the rewrites keep files that
load, launch and compute the same thing; the speed side is the GPU's to measure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, ROOT, UNSEEN
from tests.conftest import assert_gate_accepts as _accepted

pytestmark = pytest.mark.interpreter


def test_rmsnorm_launch_num_warps_round_trips_through_the_gate(tmp_path: Path) -> None:
    p = get_pass("num_warps")
    problem = KERNELS / "rmsnorm" / "problem.py"
    expert = (KERNELS / "rmsnorm" / "expert.py").read_text()
    sites = p.backward_sites(expert)
    assert [s.params["expr"] for s in sites] == [
        "_num_warps(BLOCK_M * BLOCK_N)",
        "_num_warps(LOOP_BLOCK_N)",
    ]
    site = sites[0]
    simplified = p.simplify(expert, site)
    assert simplified.applied and simplified.source is not None
    assert "num_warps=_num_warps(BLOCK_M * BLOCK_N)" not in simplified.source
    _accepted(problem, simplified.source, tmp_path / "backward.py")

    # Forward into a file where the other launch lost its num_warps too.
    source = p.simplify(simplified.source, p.backward_sites(simplified.source)[0]).source
    assert source is not None and "num_warps=" not in source
    fwd = next(s for s in p.forward_sites(source) if s.line == site.line)
    restored = p.apply(source, fwd, site.params)
    assert restored.applied and restored.source is not None
    assert restored.source.count("num_warps=_num_warps(BLOCK_M * BLOCK_N),\n") == 1
    _accepted(problem, restored.source, tmp_path / "forward.py")


def test_unseen_softmax_configs_and_launch_are_found_and_stay_correct(tmp_path: Path) -> None:
    p = get_pass("num_warps")
    source = (UNSEEN / "num_warps_rows_softmax.py").read_text()
    sites = p.backward_sites(source)
    assert [(s.params["kind"], s.params["expr"]) for s in sites] == [
        ("config", "2"),
        ("config", "8"),
        ("launch", "max(4, min(16, cols // 512))"),
    ]
    while rest := p.backward_sites(source):
        step = p.simplify(source, rest[0])
        assert step.applied and step.source is not None
        source = step.source
    assert 'Config({"ROWS": 1}, 4)' in source and "num_warps=max" not in source
    _accepted(
        ROOT / "src" / "klineage" / "examples" / "softmax" / "problem.py", source, tmp_path / "k.py"
    )
