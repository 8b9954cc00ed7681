"""block_size on the CPU gate: corpus expert backward and forward, and an unseen kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, ROOT
from tests.conftest import assert_gate_accepts as _gate

pytestmark = pytest.mark.interpreter

SOFTMAX_PROBLEM = ROOT / "src" / "klineage" / "examples" / "softmax" / "problem.py"
UNSEEN = Path(__file__).resolve().parent / "unseen" / "block_size_softmax.py"


def test_cross_entropy_chunk_halved_then_restored(tmp_path: Path) -> None:
    p = get_pass("block_size")
    problem = KERNELS / "cross_entropy" / "problem.py"
    expert = (KERNELS / "cross_entropy" / "expert.py").read_text()
    sites = p.backward_sites(expert)
    assert [s.params["name"] for s in sites] == ["BLOCK_V"] * 4 + ["BLOCK_B"]
    site = sites[0]
    r = p.simplify(expert, site)
    assert r.applied and r.source is not None
    assert 'triton.Config({"BLOCK_V": 2048}, num_warps=8)' in r.source
    _gate(problem, r.source, tmp_path / "simplified.py")

    forward = next(s for s in p.forward_sites(r.source) if s.index == site.index)
    assert forward.line == site.line
    back = p.apply(r.source, forward, site.params)
    assert back.applied and back.source == expert
    # Byte for byte the expert, which tests/interp/test_corpus_gate.py gates.


def test_unseen_constant_and_lowercase_local(tmp_path: Path) -> None:
    p = get_pass("block_size")
    source = UNSEEN.read_text()
    sites = p.backward_sites(source)
    assert [(s.params["name"], s.params["value"]) for s in sites] == [
        ("COL_TILE", 256),
        ("block_r", 32),
    ]
    for index in range(len(sites)):  # each site halved once, sites recomputed each time
        site = p.backward_sites(source)[index]
        r = p.simplify(source, site)
        assert r.applied and r.source is not None, r.reason
        source = r.source
    assert "COL_TILE = 128" in source and "block_r = 16" in source
    _gate(SOFTMAX_PROBLEM, source, tmp_path / "simplified.py")
