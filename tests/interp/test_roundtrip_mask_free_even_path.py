"""mask_free_even_path on the CPU gate: the matmul EVEN_K path removed and restored, an unseen
looped softmax with a negated DIVISIBLE heuristic, and the site count of every corpus expert."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, MATMUL_ROUND_TRIP_REGIMES, ROOT, UNSEEN, assert_is_the_expert
from tests.conftest import assert_gate_accepts as _accepted

pytestmark = pytest.mark.interpreter

SITES = {
    "matmul": 1,
    "attention": 2,
    "softmax": 0,
    "rmsnorm": 0,
    "layernorm": 0,
    "cross_entropy": 0,
}


@pytest.mark.parametrize("workload", sorted(SITES))
def test_corpus_site_counts(workload: str) -> None:
    expert = (KERNELS / workload / "expert.py").read_text()
    assert len(get_pass("mask_free_even_path").backward_sites(expert)) == SITES[workload]


def test_matmul_even_k_path_round_trips_through_the_gate(tmp_path: Path) -> None:
    p = get_pass("mask_free_even_path")
    problem = KERNELS / "matmul" / "problem.py"
    expert = (KERNELS / "matmul" / "expert.py").read_text()
    (site,) = p.backward_sites(expert)
    assert site.params["flag"] == "EVEN_K" and site.params["statements"] == 3
    simplified = p.simplify(expert, site)
    assert simplified.applied and simplified.source is not None
    assert "EVEN_K" not in simplified.source and "@triton.heuristics" not in simplified.source
    # The K loop without its EVEN_K branch, on the regimes where the expert took it (tiny_fp16,
    # even_k_fp32) and a masked tail (odd_fp32); MATMUL_ROUND_TRIP_REGIMES says what each runs.
    _accepted(problem, simplified.source, tmp_path / "backward.py", MATMUL_ROUND_TRIP_REGIMES)

    fwd = min(
        (s for s in p.forward_sites(simplified.source) if s.function == site.function),
        key=lambda s: abs(s.line - site.line),
    )
    restored = p.apply(simplified.source, fwd, site.params)
    assert restored.applied and restored.source is not None
    assert (
        '@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_SIZE_K"] == 0})'
        in restored.source
    )
    assert "            a = tl.load(a_ptrs)\n            b = tl.load(b_ptrs)\n" in restored.source
    assert_is_the_expert(restored.source, "matmul")  # gated by test_corpus_gate.py


def test_unseen_divisible_softmax_is_found_and_stays_correct(tmp_path: Path) -> None:
    p = get_pass("mask_free_even_path")
    source = (UNSEEN / "mask_free_even_path_softmax.py").read_text()
    sites = p.backward_sites(source)
    assert [(s.params["flag"], s.params["negated"]) for s in sites] == [
        ("DIVISIBLE", True),
        ("DIVISIBLE", True),
        ("DIVISIBLE", False),
    ]
    while rest := p.backward_sites(source):
        step = p.simplify(source, rest[0])
        assert step.applied and step.source is not None
        source = step.source
    assert "        if not DIVISIBLE:\n" not in source and "@triton.heuristics" not in source
    assert "TILE: constexpr):" in source  # the flag's parameter went with its last use
    _accepted(
        ROOT / "src" / "klineage" / "examples" / "softmax" / "problem.py", source, tmp_path / "k.py"
    )
