"""autotune_table on the CPU gate: corpus expert backward and forward, and an unseen kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, ROOT
from tests.conftest import assert_gate_accepts as _gate

pytestmark = pytest.mark.interpreter

SOFTMAX_PROBLEM = ROOT / "src" / "klineage" / "examples" / "softmax" / "problem.py"
UNSEEN = Path(__file__).resolve().parent / "unseen" / "autotune_table_softmax.py"


def test_cross_entropy_table_reduced_then_restored(tmp_path: Path) -> None:
    p = get_pass("autotune_table")
    problem = KERNELS / "cross_entropy" / "problem.py"
    expert = (KERNELS / "cross_entropy" / "expert.py").read_text()
    (site,) = p.backward_sites(expert)
    assert site.function == "_cross_entropy_row_kernel" and site.params["n_configs"] == 4
    r = p.simplify(expert, site)
    assert r.applied and r.source is not None
    assert r.source.count("triton.Config(") == 1
    _gate(problem, r.source, tmp_path / "simplified.py")

    forward = next(s for s in p.forward_sites(r.source) if s.function == site.function)
    back = p.apply(r.source, forward, site.params)
    assert back.applied and back.source == expert
    # Byte for byte the expert, which tests/interp/test_corpus_gate.py gates.


def test_unseen_positional_named_table(tmp_path: Path) -> None:
    p = get_pass("autotune_table")
    source = UNSEEN.read_text()
    (site,) = p.backward_sites(source)
    assert (site.function, site.params["name"], site.params["n_configs"]) == (
        "row_softmax",
        "TUNING",
        3,
    )
    r = p.simplify(source, site)
    assert r.applied and r.source is not None
    assert p.backward_sites(r.source) == []
    _gate(SOFTMAX_PROBLEM, r.source, tmp_path / "simplified.py")
