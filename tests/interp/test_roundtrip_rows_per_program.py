"""rows_per_program on the CPU gate: one row per program still computes RMSNorm; restoring the
expert's rows-per-program expression passes again; an unseen softmax with its own names is found
and simplified."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, ROOT, UNSEEN
from tests.conftest import assert_gate_accepts as _gate

pytestmark = pytest.mark.interpreter


def test_rmsnorm_one_row_per_program_and_back(tmp_path: Path) -> None:
    p = get_pass("rows_per_program")
    expert = (KERNELS / "rmsnorm" / "expert.py").read_text()
    (site,) = p.backward_sites(expert)
    assert site.params["expr"] == "min(max(TILE_ELEMENTS // BLOCK_N, 1), triton.next_power_of_2(M))"
    simple = p.simplify(expert, site)
    assert simple.applied and simple.source is not None
    assert "        BLOCK_M = 1\n" in simple.source
    _gate(KERNELS / "rmsnorm" / "problem.py", simple.source, tmp_path / "simple.py")

    (fwd,) = [s for s in p.forward_sites(simple.source) if s.line == site.line]
    back = p.apply(simple.source, fwd, site.params)
    assert back.applied and back.source == expert
    # Byte for byte the expert, which tests/interp/test_corpus_gate.py gates.


def test_unseen_softmax_rows_per_program(tmp_path: Path) -> None:
    p = get_pass("rows_per_program")
    source = (UNSEEN / "rows_per_program_softmax.py").read_text()
    (site,) = p.backward_sites(source)
    assert site.params["name"] == "rows_per_prog" and site.params["keyword"] == "R"
    simple = p.simplify(source, site)
    assert simple.applied and simple.source is not None
    assert "rows_per_prog = 1\n" in simple.source
    _gate(
        ROOT / "src" / "klineage" / "examples" / "softmax" / "problem.py",
        simple.source,
        tmp_path / "k.py",
    )
