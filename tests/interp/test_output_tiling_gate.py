"""output_tiling on the held-out long-K matmul naive, through the CPU gate (~20 s a call here).

Its CPU regimes tiny (1 x 3 outputs, K = 37: one 16 x 16 tile, most lanes padded, K under
one step), ragged (3 x 2, K = 700 = 10 * 64 + 60: a masked K tail) and fp16 (tl.dot on half
inputs, fp32 accumulation) hold what the tile must get right: the padded rows and columns
masked off in both loads and the store, the K-block vectors broadcast along the right axis of
each tile (a wrong one gives a transposed or mis-shaped tile: a compile error or wrong
outputs). Then split_k on the tiled kernel, four chunks of K on ragged: the pair the optimize
loop proposes together when the tile alone is correct but not faster (one tile left for
16 x 16 outputs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.rewrite import all_passes
from tests.conftest import ROOT

pytestmark = pytest.mark.interpreter

LONG_K = ROOT / "src" / "klineage" / "heldout" / "matmul_long_k_small_mn"


def _applied(name: str, source: str, params: dict[str, object]) -> str:
    p = all_passes()[name]
    (site,) = p.forward_sites(source)
    r = p.apply(source, site, params)
    assert r.applied and r.source is not None, r.reason
    return r.source


def _verdict(source: str, path: Path, regimes: list[str] | None = None) -> str:
    """ "" if the CPU gate accepts source (written to path), else its message."""
    path.write_text(source, encoding="utf-8")
    config = GateConfig(cache=False, timeout_s=300.0)
    v = run_gate(LONG_K / "problem.py", path, device="cpu", regimes=regimes, config=config)
    return "" if v.accepted else v.message


def test_the_gate_accepts_the_tiled_long_k_matmul_on_every_cpu_regime(tmp_path: Path) -> None:
    out = _applied("output_tiling", (LONG_K / "naive.py").read_text(encoding="utf-8"), {})
    assert _verdict(out, tmp_path / "tiled.py") == ""


def test_the_gate_accepts_the_tile_then_split_k(tmp_path: Path) -> None:
    tiled = _applied("output_tiling", (LONG_K / "naive.py").read_text(encoding="utf-8"), {})
    out = _applied("split_k", tiled, {"split": 4})
    assert _verdict(out, tmp_path / "tiled_split.py", ["ragged"]) == ""


def test_the_gate_rejects_a_tile_whose_padded_rows_are_stored(tmp_path: Path) -> None:
    """The store's mask is what keeps a 16-row tile of a 3-row output in bounds: without it
    the padded lanes write past C (caught by the gate's guarded allocations or as a crash);
    this checks the gate sees the difference the mask makes, not that the rewrite has one."""
    out = _applied("output_tiling", (LONG_K / "naive.py").read_text(encoding="utf-8"), {})
    broken = out.replace(", mask=i_ok & j_ok)", ")")
    assert broken != out
    assert _verdict(broken, tmp_path / "unmasked.py", ["ragged"]) != ""
