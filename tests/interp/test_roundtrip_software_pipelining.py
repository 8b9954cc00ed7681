"""software_pipelining on the CPU gate: corpus expert backward and forward, and an unseen kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, MATMUL_ROUND_TRIP_REGIMES, ROOT
from tests.conftest import assert_gate_accepts as _gate

pytestmark = pytest.mark.interpreter

SOFTMAX_PROBLEM = ROOT / "src" / "klineage" / "examples" / "softmax" / "problem.py"
UNSEEN = Path(__file__).resolve().parent / "unseen" / "software_pipelining_softmax.py"


def test_matmul_config_depth_removed_then_restored(tmp_path: Path) -> None:
    p = get_pass("software_pipelining")
    problem = KERNELS / "matmul" / "problem.py"
    expert = (KERNELS / "matmul" / "expert.py").read_text()
    sites = p.backward_sites(expert)
    assert len(sites) == 8 and {s.params["kind"] for s in sites} == {"config"}
    site = sites[0]
    assert site.params["num_stages"] == 3
    r = p.simplify(expert, site)
    assert r.applied and r.source is not None
    assert len(p.backward_sites(r.source)) == 7
    # Config 1 lost its depth: tiny_fp16 builds and runs it (fp32 prunes it by shared memory,
    # which odd_fp32 and even_k_fp32 check with the changed num_stages in the estimate).
    _gate(problem, r.source, tmp_path / "simplified.py", MATMUL_ROUND_TRIP_REGIMES)

    forward = next(
        s for s in p.forward_sites(r.source) if s.line == site.line and s.params["kind"] == "config"
    )
    back = p.apply(r.source, forward, site.params)
    assert back.applied and back.source == expert
    # Byte for byte the expert, which tests/interp/test_corpus_gate.py gates.


def test_unseen_aliased_range_and_launch_depth(tmp_path: Path) -> None:
    p = get_pass("software_pipelining")
    source = UNSEEN.read_text()
    sites = p.backward_sites(source)
    assert [(s.params["kind"], s.params["num_stages"]) for s in sites] == [
        ("range", 3),
        ("launch", 2),
    ]
    while sites:  # every site, one after another, recomputing the sites each time
        r = p.simplify(source, sites[0])
        assert r.applied and r.source is not None, r.reason
        source = r.source
        sites = p.backward_sites(source)
    assert "T.range(first, n_rows, step):" in source and "num_stages=1" in source
    _gate(SOFTMAX_PROBLEM, source, tmp_path / "simplified.py")
