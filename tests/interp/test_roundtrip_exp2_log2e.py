"""exp2_log2e on the CPU gate: one corpus site simplified and restored, and an unseen kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, ROOT, UNSEEN
from tests.conftest import assert_gate_accepts as _accepted

pytestmark = pytest.mark.interpreter


def test_cross_entropy_log2_site_round_trips_through_the_gate(tmp_path: Path) -> None:
    p = get_pass("exp2_log2e")
    problem = KERNELS / "cross_entropy" / "problem.py"
    expert = (KERNELS / "cross_entropy" / "expert.py").read_text()
    sites = p.backward_sites(expert)
    assert [s.params["op"] for s in sites] == ["exp2", "exp2", "log2"]
    site = sites[2]  # lse = m + tl.log2(s) * _LN2
    simplified = p.simplify(expert, site)
    assert simplified.applied and simplified.source is not None
    assert "lse = m + tl.log(s)\n" in simplified.source
    _accepted(problem, simplified.source, tmp_path / "backward.py")

    # Forward into a kernel where every exp2 is already gone, not just the expert's text.
    source = simplified.source
    while rest := p.backward_sites(source):
        step = p.simplify(source, rest[0])
        assert step.applied and step.source is not None
        source = step.source
    fwd = next(
        s for s in p.forward_sites(source) if s.line == site.line and s.params["op"] == "log"
    )
    restored = p.apply(source, fwd, site.params)
    assert restored.applied and restored.source is not None
    assert "lse = m + tl.log2(s) * _LN2\n" in restored.source
    assert "tl.exp2" not in restored.source
    _accepted(problem, restored.source, tmp_path / "forward.py")


def test_unseen_base2_softmax_is_found_and_stays_correct(tmp_path: Path) -> None:
    p = get_pass("exp2_log2e")
    source = (UNSEEN / "exp2_log2e_base2_softmax.py").read_text()
    sites = p.backward_sites(source)
    assert [s.params["op"] for s in sites] == ["exp2", "log2", "exp2"]
    assert sites[0].params["simplified"] == "tlang.math.exp(v - top)"
    while rest := p.backward_sites(source):
        step = p.simplify(source, rest[0])
        assert step.applied and step.source is not None
        source = step.source
    assert "exp2(" not in source and "tlang.log2(" not in source
    _accepted(
        ROOT / "src" / "klineage" / "examples" / "softmax" / "problem.py", source, tmp_path / "k.py"
    )
