"""The corpus families colsum, cumsum, transpose and skinny_matmul (issue 16): each expert's
central trick, broken, is rejected by the CPU gate on the regime that exercises it. That the
experts and the naive kernels pass on every CPU regime is test_corpus_gate.py's parametrized
test."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import Stage, run_gate
from tests.conftest import KERNELS

pytestmark = pytest.mark.interpreter

# family, regime, the expert's text, what a broken variant writes instead
BROKEN = [
    # One row tile per split: the loop over row tiles stops after its first tile (tall_small
    # has 2 tiles of 256 rows in each full split of 512), so most rows are never added.
    (
        "colsum",
        "tall_small",
        "row_end = tl.minimum(row_start + rows_per_split, M)",
        "row_end = tl.minimum(row_start + BLOCK_M, M)",
    ),
    # The carried prefix dropped: every tile after a row's first restarts from the chunk's
    # prefix alone (long_small has 3 tiles a row).
    ("cumsum", "long_small", "carry += tl.sum(x, axis=0)", "carry += 0.0"),
    # The exchange dropped: tiles land in the right place of y, untransposed (64 x 64 tiles, so
    # the shapes still agree).
    ("transpose", "even", "tl.trans(x)", "x"),
    # The combine adds only the first split's partials: ragged splits K = 300 three ways on the
    # interpreter's one pseudo-SM (128 + 128 + 44), so 172 of the 300 products go missing.
    (
        "skinny_matmul",
        "ragged",
        "mask = (s < n_splits)[:, None] & in_mn[None, :]",
        "mask = (s < 1)[:, None] & in_mn[None, :]",
    ),
]


@pytest.mark.parametrize(
    ("family", "regime", "expert", "broken"), BROKEN, ids=[b[0] for b in BROKEN]
)
def test_the_expert_without_its_trick_is_rejected(
    family: str, regime: str, expert: str, broken: str, tmp_path: Path
) -> None:
    text = (KERNELS / family / "expert.py").read_text()
    assert expert in text, f"{family}/expert.py no longer has {expert!r}: update this test"
    candidate = tmp_path / "expert.py"
    candidate.write_text(text.replace(expert, broken))
    r = run_gate(KERNELS / family / "problem.py", candidate, device="cpu", regimes=[regime],
                 config=GateConfig(cache=False))  # fmt: skip
    assert not r.accepted and r.failed_stage is Stage.CORRECTNESS, r.message
    assert regime in r.message, r.message
