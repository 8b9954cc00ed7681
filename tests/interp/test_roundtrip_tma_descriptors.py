"""tma_descriptors round trip on the matmul expert and an unseen kernel, gated on the CPU.

The CPU gate runs the pointer path in every case (the interpreter has no TMA and the guards
say so): these tests check that the dispatch rewrite keeps the kernel correct, not its speed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import MATMUL_ROUND_TRIP_REGIMES, ROOT
from tests.conftest import assert_gate_accepts as _gate

pytestmark = pytest.mark.interpreter

MATMUL = ROOT / "src" / "klineage" / "kernels" / "matmul"
SOFTMAX = ROOT / "src" / "klineage" / "examples" / "softmax" / "problem.py"
UNSEEN = Path(__file__).resolve().parent / "unseen" / "tma_descriptors_softmax.py"


def test_matmul_expert_pointer_only_then_tma_again(tmp_path: Path) -> None:
    p = get_pass("tma_descriptors")
    expert = (MATMUL / "expert.py").read_text()
    (site,) = p.backward_sites(expert)
    assert site.params["guard"] == "_use_tma(a, b, c)" and site.function == "matmul"
    simple = p.simplify(expert, site)
    assert simple.applied and simple.source == expert.replace("if _use_tma(a, b, c):", "if False:")
    # The launcher's dispatch: the CPU runs the pointer path on every regime (see above).
    _gate(
        MATMUL / "problem.py", simple.source, tmp_path / "simplified.py", MATMUL_ROUND_TRIP_REGIMES
    )

    (fwd,) = p.forward_sites(simple.source)
    assert fwd.line == site.line
    restored = p.apply(simple.source, fwd, site.params)
    assert restored.applied and restored.source == expert
    # Byte for byte the expert, which tests/interp/test_corpus_gate.py gates.


def test_unseen_inverted_guard_through_a_launcher(tmp_path: Path) -> None:
    p = get_pass("tma_descriptors")
    source = UNSEEN.read_text()
    (site,) = p.backward_sites(source)
    assert site.params["tma_branch"] == "orelse" and site.params["guard"] == "_pointer_only(x)"
    simple = p.simplify(source, site)
    assert simple.applied and simple.source == source.replace("if _pointer_only(x):", "if True:")
    _gate(SOFTMAX, simple.source, tmp_path / "unseen_simplified.py")
    (fwd,) = p.forward_sites(simple.source)
    assert p.apply(simple.source, fwd, site.params).source == source
