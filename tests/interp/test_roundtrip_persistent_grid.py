"""persistent_grid on the CPU gate: softmax with one program per row block still passes;
restoring the persistent grid passes again; an unseen persistent RMSNorm is found and
simplified."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, UNSEEN
from tests.conftest import assert_gate_accepts as _gate

pytestmark = pytest.mark.interpreter


def test_softmax_one_program_per_block_and_back(tmp_path: Path) -> None:
    p = get_pass("persistent_grid")
    expert = (KERNELS / "softmax" / "expert.py").read_text()
    (site,) = p.backward_sites(expert)
    assert site.params["expr"] == "min(num_row_blocks, resident)"
    simple = p.simplify(expert, site)
    assert simple.applied and simple.source is not None
    assert "            grid = num_row_blocks\n" in simple.source
    _gate(KERNELS / "softmax" / "problem.py", simple.source, tmp_path / "simple.py")

    (fwd,) = [s for s in p.forward_sites(simple.source) if s.line == site.line]
    back = p.apply(simple.source, fwd, site.params)
    assert back.applied and back.source == expert
    # Byte for byte the expert, which tests/interp/test_corpus_gate.py gates.


def test_unseen_persistent_rmsnorm(tmp_path: Path) -> None:
    p = get_pass("persistent_grid")
    source = (UNSEEN / "persistent_grid_rmsnorm.py").read_text()
    (site,) = p.backward_sites(source)
    assert site.params["expr"] == "min(M, _programs(x2))" and site.params["count"] == "M"
    simple = p.simplify(source, site)
    assert simple.applied and simple.source is not None
    assert "rms_rows[(M,)](" in simple.source
    _gate(KERNELS / "rmsnorm" / "problem.py", simple.source, tmp_path / "k.py")
