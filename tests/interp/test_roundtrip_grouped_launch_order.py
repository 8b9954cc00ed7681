"""grouped_launch_order on the CPU gate: the matmul expert's grouped order made row-major and
grouped again, an unseen inline-grouped matmul, and the site count of every corpus expert."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, UNSEEN, assert_is_the_expert
from tests.conftest import assert_gate_accepts as _accepted

pytestmark = pytest.mark.interpreter

SITES = {
    "matmul": 1,
    "attention": 0,
    "softmax": 0,
    "rmsnorm": 0,
    "layernorm": 0,
    "cross_entropy": 0,
}


@pytest.mark.parametrize("workload", sorted(SITES))
def test_corpus_site_counts(workload: str) -> None:
    expert = (KERNELS / workload / "expert.py").read_text()
    assert len(get_pass("grouped_launch_order").backward_sites(expert)) == SITES[workload]


def test_matmul_grouped_order_round_trips_through_the_gate(tmp_path: Path) -> None:
    p = get_pass("grouped_launch_order")
    problem = KERNELS / "matmul" / "problem.py"
    expert = (KERNELS / "matmul" / "expert.py").read_text()
    (site,) = p.backward_sites(expert)
    assert site.function == "_grouped_pid" and site.params["group"] == "GROUP_SIZE_M"
    simplified = p.simplify(expert, site)
    assert simplified.applied and simplified.source is not None
    assert "    pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n\n" in simplified.source
    assert "num_pid_m" not in simplified.source  # only the group arithmetic used it
    _accepted(problem, simplified.source, tmp_path / "backward.py")

    (fwd,) = p.forward_sites(simplified.source)
    restored = p.apply(simplified.source, fwd, site.params)
    assert restored.applied and restored.source is not None
    assert (
        "    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)\n    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)\n"
        in restored.source
    )
    assert "    pid_n = (pid % num_pid_in_group) // group_size_m\n" in restored.source
    assert_is_the_expert(restored.source, "matmul")  # gated by test_corpus_gate.py


def test_unseen_inline_grouped_matmul_is_found_and_stays_correct(tmp_path: Path) -> None:
    p = get_pass("grouped_launch_order")
    source = (UNSEEN / "grouped_launch_order_matmul.py").read_text()
    (site,) = p.backward_sites(source)
    assert site.function == "gemm_kernel" and site.params["group"] == "4"
    simplified = p.simplify(source, site)
    assert simplified.applied and simplified.source is not None
    assert "    tm = pid // tiles_n\n    tn = pid % tiles_n\n" in simplified.source
    _accepted(KERNELS / "matmul" / "problem.py", simplified.source, tmp_path / "k.py")
