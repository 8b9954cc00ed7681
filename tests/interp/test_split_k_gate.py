"""split_k on held-out naive kernels, through the CPU gate (~2-12 s a call here).

The long-K matmul's ragged regime (M=3, N=2, K=700 = 10 * 64 + 60) at SPLIT 4 gives each of the
6 outputs four K chunks of 192 (three steps of 64 each), the last ragged with a masked tail, and
the sum kernel adds the four fp32 rows. It is no dearer than the tiny regime (8.8 s against
8.0 s), whose K = 37 fits one step and so would leave three of the four chunks empty.

The column max (a running maximum over a while loop, split with a max combine): column_tiling
then split_k at the default SPLIT, on the problem's CPU regimes, splits ragged_fp16's 70 rows
into 3 chunks of 32, 32 and 6 rows (tiny's 5 rows, under one step of 32, stay one chunk);
split_k alone at SPLIT 4 leaves chunks empty (3 of 4 in tiny, the regime it is gated on),
whose -inf partials the combine ignores. ragged_fp16's 512 columns catch a split that loses the row at
a chunk boundary (a given row holds no column's maximum with probability (69/70)^512 < 1e-3;
at 24 columns, as it was, one trial in 3 did). (The gemv, column-mean and tall-skinny
naive kernels pass every CPU regime, rewritten, by hand.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.rewrite import all_passes
from tests.conftest import ROOT

pytestmark = pytest.mark.interpreter

HELDOUT = ROOT / "src" / "klineage" / "heldout"
COLUMN_MAX = HELDOUT / "column_max_bf16"


def _applied(name: str, source: str, params: dict[str, object]) -> str:
    p = all_passes()[name]
    (site,) = p.forward_sites(source)
    r = p.apply(source, site, params)
    assert r.applied and r.source is not None, r.reason
    return r.source


def _verdict(problem: Path, source: str, path: Path, regimes: list[str] | None = None) -> str:
    """ "" if the CPU gate accepts source (written to path) for problem, else its message.
    The interpreter runs programs one after another, so a call gets 300 s (the default 120 s
    is a candidate's, on a GPU)."""
    path.write_text(source, encoding="utf-8")
    config = GateConfig(cache=False, timeout_s=300.0)
    v = run_gate(problem, path, device="cpu", regimes=regimes, config=config)
    return "" if v.accepted else v.message


def test_the_gate_accepts_a_split_k_long_k_matmul(tmp_path: Path) -> None:
    source = (HELDOUT / "matmul_long_k_small_mn" / "naive.py").read_text(encoding="utf-8")
    out = _applied("split_k", source, {"split": 4})
    problem = HELDOUT / "matmul_long_k_small_mn" / "problem.py"
    assert _verdict(problem, out, tmp_path / "matmul_long_k_split.py", ["ragged"]) == ""


def _tiled_split_column_max() -> str:
    source = (COLUMN_MAX / "naive.py").read_text(encoding="utf-8")
    out = _applied("split_k", _applied("column_tiling", source, {}), {})
    assert "_split_k_max[(" in out and "while i < tl.minimum(k_lo + k_chunk, height):" in out
    return out


def test_the_gate_accepts_column_tiling_then_split_k_on_the_column_max(tmp_path: Path) -> None:
    out = _tiled_split_column_max()
    assert _verdict(COLUMN_MAX / "problem.py", out, tmp_path / "column_max_split.py") == ""


def test_the_gate_accepts_split_k_alone_with_empty_chunks_on_the_column_max(
    tmp_path: Path,
) -> None:
    # tiny only: its 5 rows leave 3 of the 4 chunks empty. ragged_fp16 untiled is 2048
    # interpreted programs (114-156 s of a 2-core machine, the end of CI's run waiting on it).
    out = _applied("split_k", (COLUMN_MAX / "naive.py").read_text(encoding="utf-8"), {"split": 4})
    path = tmp_path / "column_max_split4.py"
    assert _verdict(COLUMN_MAX / "problem.py", out, path, ["tiny"]) == ""


def test_a_split_column_max_losing_a_chunk_boundary_row_is_rejected(tmp_path: Path) -> None:
    out = _tiled_split_column_max()
    assert "SPLIT = max(1, min(512, triton.cdiv(4 * 132, triton.cdiv(width, BLOCK_N)), " in out
    # chunk 1 starts a row late: it reads rows 33-64, so no program reads row 32
    late = out.replace("    i = k_lo\n", "    i = k_lo + tl.where(split == 1, 1, 0)\n")
    assert late != out
    why = _verdict(COLUMN_MAX / "problem.py", late, tmp_path / "late.py", ["ragged_fp16"])
    assert "correctness: ragged_fp16" in why, why
