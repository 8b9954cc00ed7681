"""tile_accumulator (rewrite/passes/tile_accumulator.py): source rewrites only, no kernels run;
tests/interp/test_tile_accumulator.py runs them."""

from __future__ import annotations

import pytest

from klineage.rewrite import all_passes
from tests.conftest import ROOT

PASS = all_passes()["tile_accumulator"]
KERNELS = ROOT / "src" / "klineage" / "kernels"

# A column sum written for the purpose: a [ROWS, COLS] tile a step, summed down its rows.
COLUMN_SUM = """import torch
import triton
import triton.language as tl


@triton.jit
def column_sum(x_ptr, y_ptr, n_rows, n_cols, pitch, ROWS: tl.constexpr, COLS: tl.constexpr):
    cols = tl.program_id(0) * COLS + tl.arange(0, COLS)
    total = tl.zeros((COLS,), dtype=tl.float32)
    for r0 in range(0, n_rows, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        ok = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        x = tl.load(x_ptr + rows[:, None] * pitch + cols[None, :], mask=ok, other=0.0)
        total += tl.sum(x.to(tl.float32), axis=0)
    tl.store(y_ptr + cols, total, mask=cols < n_cols)


def launch(x):
    y = torch.empty(x.shape[1], dtype=torch.float32, device=x.device)
    column_sum[(triton.cdiv(x.shape[1], 16),)](x, y, x.shape[0], x.shape[1], x.stride(0), ROWS=8, COLS=16)
    return y
"""

COLUMN_SUM_AFTER = """import torch
import triton
import triton.language as tl


@triton.jit
def column_sum(x_ptr, y_ptr, n_rows, n_cols, pitch, ROWS: tl.constexpr, COLS: tl.constexpr):
    cols = tl.program_id(0) * COLS + tl.arange(0, COLS)
    total = tl.zeros((COLS,), dtype=tl.float32)
    # tile_accumulator: total's sum of each step kept per element of the [ROWS, COLS] tile, reduced once after the loop
    total_tile = tl.full((ROWS, COLS), 0.0, tl.float32)
    for r0 in range(0, n_rows, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        ok = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        x = tl.load(x_ptr + rows[:, None] * pitch + cols[None, :], mask=ok, other=0.0)
        total_tile += x.to(tl.float32)
    total += tl.sum(total_tile, axis=0)
    tl.store(y_ptr + cols, total, mask=cols < n_cols)


def launch(x):
    y = torch.empty(x.shape[1], dtype=torch.float32, device=x.device)
    column_sum[(triton.cdiv(x.shape[1], 16),)](x, y, x.shape[0], x.shape[1], x.stride(0), ROWS=8, COLS=16)
    return y
"""

# A running maximum over a row walked in 1-D blocks (no keep_dims, a scalar total).
ROW_MAX = """import triton
import triton.language as tl


@triton.jit
def row_max(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = float("-inf")
    for c0 in range(0, n, BLOCK):
        c = c0 + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * n + c, mask=c < n, other=float("-inf"))
        m = tl.maximum(m, tl.max(v, 0))
    tl.store(y_ptr + row, m)


def launch(x):
    y = x.new_empty(x.shape[0])
    row_max[(x.shape[0],)](x, y, x.shape[1], BLOCK=16)
    return y
"""


def forward(source: str) -> str:
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site)
    assert r.applied and r.source, r.reason
    return r.source


def test_golden_column_sum() -> None:
    assert forward(COLUMN_SUM) == COLUMN_SUM_AFTER


def test_a_running_maximum_of_1d_blocks_keeps_a_block_of_maxima() -> None:
    out = forward(ROW_MAX)
    assert 'm_tile = tl.full((BLOCK,), float("-inf"), tl.float32)' in out
    assert (
        "        m_tile = tl.maximum(m_tile, v)\n    m = tl.maximum(m, tl.max(m_tile, 0))\n" in out
    )


def _variant(old: str, new: str) -> str:
    assert old in COLUMN_SUM
    return COLUMN_SUM.replace(old, new)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        # the per-step total is read in the loop: a running value, not only a final one
        (_variant("        total += tl.sum(x.to(tl.float32), axis=0)\n",
                  "        total += tl.sum(x.to(tl.float32), axis=0)\n        tl.store(y_ptr + cols, total)\n"),
         "used elsewhere in the loop"),
        (_variant("tl.sum(x.to(tl.float32), axis=0)", "tl.sum(x.to(tl.float32) - total, axis=0)"),
         "reads total"),
        (_variant("tl.sum(x.to(tl.float32), axis=0)", "tl.sum(x.to(tl.float32)[:, :, None], axis=2)"),
         "reduces nothing"),
        # a runtime block size: tl.full needs a constexpr shape
        (_variant("rows = r0 + tl.arange(0, ROWS)", "rows = r0 + tl.arange(0, n_rows)"), "not a tl.constexpr"),
        # nothing says the total is a float
        (_variant("total = tl.zeros((COLS,), dtype=tl.float32)", "total = tl.zeros((COLS,), dtype=tl.int32)")
         .replace("x.to(tl.float32)", "x"), "is a float"),
        (_variant("x = tl.load(", "x = helper(").replace("x.to(tl.float32)", "x"), "not known statically"),
    ],
)  # fmt: skip
def test_skips_say_why(source: str, reason: str) -> None:
    assert PASS.forward_sites(source) == []
    (why,) = PASS.why_not(source)
    assert reason in why, why


def test_backward_on_the_colsum_expert_and_forward_again() -> None:
    expert = (KERNELS / "colsum" / "expert.py").read_text()
    (site,) = PASS.backward_sites(expert)
    simple = PASS.simplify(expert, site)
    assert simple.applied and simple.source, simple.reason
    s = simple.source
    assert "acc" not in s.split("def _colsum_partial_kernel")[1].split("@triton.jit")[0].replace(
        "accumulat", ""
    )
    assert "    total = tl.zeros([BLOCK_N], dtype=tl.float32)\n" in s
    assert "        total += tl.sum(x.to(tl.float32), axis=0)\n" in s
    assert "total = tl.sum(acc, axis=0)" not in s
    assert PASS.backward_sites(s) == []
    # forward finds it again, with the expert's tile
    again = forward(s)
    assert "    total_tile = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)\n" in again
    assert "        total_tile += x.to(tl.float32)\n" in again
    assert "    total += tl.sum(total_tile, axis=0)\n" in again


def test_no_backward_site_where_the_tile_is_read_twice() -> None:
    expert = (KERNELS / "colsum" / "expert.py").read_text()
    twice = expert.replace(
        "    total = tl.sum(acc, axis=0)\n",
        "    total = tl.sum(acc, axis=0)\n    spare = tl.max(acc, axis=0)\n",
    )
    assert twice != expert and PASS.backward_sites(twice) == []
