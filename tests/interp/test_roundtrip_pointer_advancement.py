"""pointer_advancement on the CPU gate: a matmul pointer recomputed and advanced again, an
unseen online softmax with three advanced pointers, and the site count of every corpus expert."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, MATMUL_ROUND_TRIP_REGIMES, ROOT, UNSEEN, assert_is_the_expert
from tests.conftest import assert_gate_accepts as _accepted

pytestmark = pytest.mark.interpreter

SITES = {
    "matmul": 2,
    "attention": 2,
    "softmax": 0,
    "rmsnorm": 0,
    "layernorm": 0,
    "cross_entropy": 0,
}


@pytest.mark.parametrize("workload", sorted(SITES))
def test_corpus_site_counts(workload: str) -> None:
    expert = (KERNELS / workload / "expert.py").read_text()
    assert len(get_pass("pointer_advancement").backward_sites(expert)) == SITES[workload]


def test_matmul_a_pointer_round_trips_through_the_gate(tmp_path: Path) -> None:
    p = get_pass("pointer_advancement")
    problem = KERNELS / "matmul" / "problem.py"
    expert = (KERNELS / "matmul" / "expert.py").read_text()
    site = p.backward_sites(expert)[0]
    assert site.params == {
        "pointer": "a_ptrs",
        "step": "BLOCK_SIZE_K * stride_ak",
        "tail_offset": 1,
    }
    simplified = p.simplify(expert, site)
    assert simplified.applied and simplified.source is not None
    assert "        a_ptrs = a_ptrs_base + k * (BLOCK_SIZE_K * stride_ak)\n" in simplified.source
    # a_ptrs recomputed each K step: 2-4 steps, masked and unmasked (MATMUL_ROUND_TRIP_REGIMES).
    _accepted(problem, simplified.source, tmp_path / "backward.py", MATMUL_ROUND_TRIP_REGIMES)

    fwd = min(
        (s for s in p.forward_sites(simplified.source) if s.function == site.function),
        key=lambda s: abs(s.line - site.line),
    )
    restored = p.apply(simplified.source, fwd, site.params)
    assert restored.applied and restored.source is not None
    assert "a_ptrs_base" not in restored.source
    assert (
        "        a_ptrs += BLOCK_SIZE_K * stride_ak\n        b_ptrs += BLOCK_SIZE_K * stride_bk\n"
        in restored.source
    )
    assert_is_the_expert(restored.source, "matmul")  # gated by test_corpus_gate.py


def test_unseen_online_softmax_is_found_and_stays_correct(tmp_path: Path) -> None:
    p = get_pass("pointer_advancement")
    source = (UNSEEN / "pointer_advancement_softmax.py").read_text()
    sites = p.backward_sites(source)
    assert [s.params["pointer"] for s in sites] == ["p_in", "q_in", "q_out"]
    while rest := p.backward_sites(source):
        step = p.simplify(source, rest[0])
        assert step.applied and step.source is not None
        source = step.source
    assert "        p_in = p_in_base + (_it - 1) * CHUNK\n" in source
    assert "        q_out = q_out_base + j // CHUNK * CHUNK\n" in source
    _accepted(
        ROOT / "src" / "klineage" / "examples" / "softmax" / "problem.py", source, tmp_path / "k.py"
    )
