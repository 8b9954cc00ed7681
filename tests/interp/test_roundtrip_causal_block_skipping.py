"""causal_block_skipping round trip on the attention expert and an unseen kernel (CPU gate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.rewrite import get_pass
from tests.conftest import ROOT
from tests.conftest import assert_gate_accepts as _gate

pytestmark = pytest.mark.interpreter

ATTENTION = ROOT / "src" / "klineage" / "kernels" / "attention"
UNSEEN = Path(__file__).resolve().parent / "unseen" / "causal_block_skipping_single_loop.py"
# On the expert the rewrite changes the `if IS_CAUSAL:` branch only; the `else:` branch is the
# expert's, byte for byte, which test_corpus_gate.py gates on every regime. So the simplified
# expert is gated on the four causal CPU regimes: ragged keys (cpu_causal: L=131), keys shorter
# than every BLOCK_N (L=45, D=128), every block dividing L (256) and blocks that divide the keys
# but not the queries (192). The two non-causal regimes were ~30% of that call (~100 s).
CAUSAL = ("cpu_causal", "cpu_causal_d128_short", "cpu_causal_aligned", "cpu_causal_mixed")


def test_attention_expert_unsplit_then_split_again(tmp_path: Path) -> None:
    p = get_pass("causal_block_skipping")
    expert = (ATTENTION / "expert.py").read_text()
    (site,) = p.backward_sites(expert)
    assert site.params["form"] == "split" and site.function == "_attn_fwd_kernel"
    simple = p.simplify(expert, site)
    assert simple.applied and simple.source is not None
    assert "0, N_CTX, qk_scale," in simple.source
    assert simple.source.count("_attn_fwd_inner(") == expert.count("_attn_fwd_inner(") - 1
    _gate(ATTENTION / "problem.py", simple.source, tmp_path / "simplified.py", CAUSAL)

    assert p.backward_sites(simple.source) == []
    (fwd,) = p.forward_sites(simple.source)
    assert fwd.function == site.function and abs(fwd.line - site.line) <= 8
    restored = p.apply(simple.source, fwd, site.params)
    assert restored.applied and restored.source == expert
    # Byte for byte the expert, which tests/interp/test_corpus_gate.py gates.


def test_unseen_single_loop_kernel(tmp_path: Path) -> None:
    p = get_pass("causal_block_skipping")
    source = UNSEEN.read_text()
    (site,) = p.backward_sites(source)
    assert site.params == {
        "form": "loop",
        "bound": "lang.minimum((qb + 1) * BLOCK_Q, seq_len) if CAUSAL else seq_len",
    }
    simple = p.simplify(source, site)
    assert simple.applied and simple.source is not None and "stop = seq_len\n" in simple.source
    _gate(ATTENTION / "problem.py", simple.source, tmp_path / "unseen_simplified.py")
    (fwd,) = p.forward_sites(simple.source)
    assert p.apply(simple.source, fwd, site.params).source == source
