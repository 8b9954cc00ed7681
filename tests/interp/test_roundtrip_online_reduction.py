"""online_reduction on the CPU gate: softmax with the single-block kernel for every row length
(the long-row regimes included) still passes; restoring the dispatch passes again; an unseen
softmax with a reversed, chunked dispatch is found and simplified."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import KERNELS, ROOT, UNSEEN
from tests.conftest import assert_gate_accepts as _gate

pytestmark = pytest.mark.interpreter


def test_softmax_single_block_for_every_row_and_back(tmp_path: Path) -> None:
    p = get_pass("online_reduction")
    expert = (KERNELS / "softmax" / "expert.py").read_text()
    (site,) = p.backward_sites(expert)
    assert site.params["condition"] == "BLOCK_N <= MAX_FUSED_SIZE"
    simple = p.simplify(expert, site)
    assert simple.applied and simple.source is not None
    assert "_softmax_online_kernel" not in simple.source.split('"""', 2)[2]
    _gate(KERNELS / "softmax" / "problem.py", simple.source, tmp_path / "simple.py")

    (fwd,) = [s for s in p.forward_sites(simple.source) if s.function == site.function]
    back = p.apply(simple.source, fwd, site.params)
    assert back.applied and back.source == expert
    # Byte for byte the expert, which tests/interp/test_corpus_gate.py gates.


def test_unseen_reversed_chunked_dispatch(tmp_path: Path) -> None:
    p = get_pass("online_reduction")
    source = (UNSEEN / "online_reduction_softmax.py").read_text()
    (site,) = p.backward_sites(source)
    assert site.params["single_in_body"] is False
    assert site.params["looped_kernels"] == ["chunked_softmax"]
    simple = p.simplify(source, site)
    assert simple.applied and simple.source is not None
    assert "    if cols > ONE_BLOCK_LIMIT:\n" not in simple.source
    assert "def chunked_softmax" not in simple.source
    _gate(
        ROOT / "src" / "klineage" / "examples" / "softmax" / "problem.py",
        simple.source,
        tmp_path / "k.py",
    )
