"""The multi_row pass (rewrite/passes/multi_row.py): source rewrites only, no kernels run."""

from __future__ import annotations

import ast

import pytest

from klineage.rewrite import all_passes
from klineage.rewrite.passes.multi_row import MultiRow
from tests.conftest import ROOT

HELDOUT = ROOT / "src" / "klineage" / "heldout"
PASS = MultiRow()

SMALL = """
import torch
import triton
import triton.language as tl


@triton.jit
def row_sum(x_ptr, y_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n, other=0.0)
    tl.store(y_ptr + row, tl.sum(x, 0))


def launch(x):
    y = torch.empty(x.shape[0], device=x.device)
    row_sum[(x.shape[0],)](x, y, x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
"""

SMALL_AFTER = """
import torch
import triton
import triton.language as tl


@triton.jit
def row_sum(x_ptr, y_ptr, stride, n, BLOCK: tl.constexpr, n_rows, ROWS: tl.constexpr):
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS))[:, None]
    row_ok = rows < n_rows
    row = rows
    cols = tl.arange(0, BLOCK)[None, :]
    x = tl.load(x_ptr + row * stride + cols, mask=(cols < n) & row_ok, other=0.0)
    tl.store(y_ptr + row, tl.sum(x, axis=1, keep_dims=True), mask=row_ok)


def launch(x):
    y = torch.empty(x.shape[0], device=x.device)
    # multi_row: fixed; short rows fill a program
    ROWS = 8
    row_sum[(triton.cdiv(x.shape[0], ROWS),)](x, y, x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]), n_rows=x.shape[0], ROWS=ROWS)
    return y
"""


def rewritten(source: str, **params: object) -> str:
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site, dict(params))
    assert r.applied, r.reason
    assert r.source is not None and r.source != source
    ast.parse(r.source)
    return r.source


def test_golden_small_row_kernel_with_fixed_rows() -> None:
    assert SMALL_AFTER != SMALL
    assert rewritten(SMALL, rows=8) == SMALL_AFTER


def test_rmsnorm_residual_weight_load_is_shared_by_the_rows() -> None:
    out = rewritten((HELDOUT / "rmsnorm_residual" / "naive.py").read_text())
    assert "BLOCK: tl.constexpr, n_rows, ROWS: tl.constexpr" in out
    assert "rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS))[:, None]" in out
    assert "pid = rows.to(tl.int64)" in out
    assert "offs = tl.arange(0, BLOCK)[None, :]" in out
    assert "tl.sum(h * h, axis=1, keep_dims=True)" in out
    assert "mask=valid & row_ok" in out
    # the weight does not depend on the row: one [1, BLOCK] load for all the program's rows
    assert "g = tl.load(w_ptr + offs, mask=valid, other=0.0)" in out
    assert "_add_rms_row[(triton.cdiv(n_rows, ROWS),)]" in out
    assert "ROWS = min(64, max(1, 4096 // triton.next_power_of_2(n_cols)), " in out
    assert "n_rows=n_rows," in out and "ROWS=ROWS," in out


def test_cross_entropy_scalar_loads_and_stores_get_the_row_mask() -> None:
    out = rewritten((HELDOUT / "cross_entropy_label_smoothing" / "naive.py").read_text())
    assert "label = tl.load(label_ptr + b, mask=row_ok)" in out
    assert "mask=label_ok & row_ok" in out
    assert "tl.store(loss_ptr + b, loss, mask=row_ok)" in out
    assert "tl.max(z, axis=1, keep_dims=True)" in out
    assert "axis=0" not in out


def test_softmax_3d_grid_of_a_product_and_a_custom_tile() -> None:
    out = rewritten((HELDOUT / "softmax_temperature_3d" / "naive.py").read_text(), tile=2048)
    assert "tempered_softmax_3d[(triton.cdiv(nb * seq_len, ROWS),)]" in out
    assert "2048 // triton.next_power_of_2(n)" in out
    assert "n_rows=nb * seq_len," in out


@pytest.mark.parametrize(
    "name",
    [
        "absmax_row_scale",
        "add_layernorm",
        "cross_entropy_label_smoothing",
        "layernorm_no_affine",
        "log_softmax_rows",
        "logsumexp_rows",
        "rmsnorm_gemma",
        "rmsnorm_residual",
        "row_l2_normalize",
        "softmax_scaled_masked",
        "softmax_temperature_3d",
    ],
)
def test_every_one_row_heldout_kernel_is_a_site(name: str) -> None:
    out = rewritten((HELDOUT / name / "naive.py").read_text())
    assert "[:, None]" in out and "keep_dims=True" in out


def _variant(old: str, new: str) -> str:
    assert old in SMALL
    return SMALL.replace(old, new)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (_variant("    x = tl.load(", "    for k in range(row):\n        pass\n    x = tl.load("),
         "bounds depend on the row"),
        (_variant("    x = tl.load(", "    for k in range(2):\n        if k:\n            pass\n    x = tl.load("),
         "nested if statement"),
        (_variant("row = tl.program_id(0)", "row = tl.program_id(1)"), "axis 0"),
        (_variant("tl.sum(x, 0)", "tl.sum(tl.dot(x, x), 0)"), "tl.dot"),
        (_variant("cols = tl.arange(0, BLOCK)", "cols = tl.arange(0, BLOCK)[None, :]"),
         "2-D tile"),
        (_variant("tl.store(y_ptr + row, tl.sum(x, 0))", "tl.atomic_add(y_ptr + row, tl.sum(x, 0))"),
         "atomics"),
        (_variant("tl.sum(x, 0)", "tl.sum(tl.associative_scan(x, 0, _add), 0)"),
         "tl.associative_scan"),
        (_variant("tl.sum(x, 0)", "x.sum(0)"), "method call"),
        (_variant("tl.sum(x, 0)", "tl.sum(x, 0, keep_dims=True)"), "keep_dims"),
        (_variant("tl.store(y_ptr + row,", "tl.store(y_ptr,"), "does not depend on the row"),
        (_variant("row_sum[(x.shape[0],)]", "row_sum[lambda META: (x.shape[0],)]"),
         "literal 1-D tuple"),
        (_variant("    return y\n", "    row_sum[(1,)](x, y, 1, 1, BLOCK=1)\n    return y\n"),
         "launched from 2 places"),
        (_variant("row = tl.program_id(0)", "row = tl.program_id(0) + tl.num_programs(0) * 0"),
         "num_programs"),
    ],
)  # fmt: skip
def test_skips_say_why(source: str, reason: str) -> None:
    assert PASS.forward_sites(source) == []
    (why,) = PASS.why_not(source)[:1]
    assert reason in why, why


def test_params_and_backward() -> None:
    assert isinstance(all_passes()["multi_row"], MultiRow)
    (site,) = PASS.forward_sites(SMALL)
    assert site.params["kernel"] == "row_sum"
    bad = PASS.apply(SMALL, site, {"rows": 6})
    assert not bad.applied and "power of two" in bad.reason
    assert PASS.backward_sites(SMALL) == []
    assert not PASS.simplify(SMALL, site).applied
    gone = PASS.apply(_variant("row = tl.program_id(0)", "row = tl.program_id(1)"), site, {})
    assert not gone.applied and "axis 0" in gone.reason


# A row scan written for this test (not a corpus or held-out kernel): one program per row,
# the row walked in STEP-column chunks, each chunk's scan offset by the total carried so far.
ROW_SCAN = """
import torch
import triton
import triton.language as tl


@triton.jit
def prefix_rows(x_ptr, y_ptr, n, stride, STEP: tl.constexpr):
    r = tl.program_id(0)
    total = 0.0
    for start in range(0, n, STEP):
        cols = start + tl.arange(0, STEP)
        v = tl.load(x_ptr + r * stride + cols, mask=cols < n, other=0.0)
        tl.store(y_ptr + r * stride + cols, total + tl.cumsum(v, 0), mask=cols < n)
        total += tl.sum(v, 0)


def launch(x):
    y = torch.empty_like(x)
    prefix_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), STEP=32)
    return y
"""

ROW_SCAN_AFTER = """
import torch
import triton
import triton.language as tl


@triton.jit
def prefix_rows(x_ptr, y_ptr, n, stride, STEP: tl.constexpr, n_rows, ROWS: tl.constexpr):
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS))[:, None]
    row_ok = rows < n_rows
    r = rows
    total = tl.full((ROWS, 1), 0.0, tl.float32)
    for start in range(0, n, STEP):
        cols = start + tl.arange(0, STEP)[None, :]
        v = tl.load(x_ptr + r * stride + cols, mask=(cols < n) & row_ok, other=0.0)
        tl.store(y_ptr + r * stride + cols, total + tl.cumsum(v, axis=1), mask=(cols < n) & row_ok)
        total += tl.sum(v, axis=1, keep_dims=True)


def launch(x):
    y = torch.empty_like(x)
    # multi_row: a [ROWS, BLOCK] tile of about 256 elements, at most 64 rows; short rows fill a program
    ROWS = min(64, max(1, 256 // 32), triton.next_power_of_2(x.shape[0]))
    prefix_rows[(triton.cdiv(x.shape[0], ROWS),)](x, y, x.shape[1], x.stride(0), STEP=32, n_rows=x.shape[0], ROWS=ROWS)
    return y
"""


def test_golden_row_scan_walked_in_chunks() -> None:
    """The loop stays, its carried total becomes one per row ([ROWS, 1]), the chunk's scan runs
    along axis 1, and ROWS packs a tile of SCAN_TILE (256) elements with no programs floor."""
    assert rewritten(ROW_SCAN) == ROW_SCAN_AFTER


def test_reverse_cumsum_naive_is_a_site() -> None:
    """4 rows of 64-column chunks a program at every regime (the H200's best of 2/4/16/32 at
    524288 x 160: 2.66x over the naive); params bring the tile and the floor back."""
    naive = (HELDOUT / "reverse_cumsum_rows" / "naive.py").read_text()
    out = rewritten(naive)
    assert "carried = tl.full((ROWS, 1), 0.0, tl.float32)" in out
    assert "out = carried + tl.cumsum(v, axis=1)" in out
    assert "carried += tl.sum(v, axis=1, keep_dims=True)" in out
    assert "ROWS = min(64, max(1, 256 // 64), triton.next_power_of_2(rows))\n" in out
    floored = rewritten(naive, tile=4096, programs=528)
    assert "max(1, 4096 // 64)" in floored
    assert "triton.next_power_of_2(max(1, rows // 1056))" in floored


LOOPED_SUM = """
import torch
import triton
import triton.language as tl


@triton.jit
def row_total(x_ptr, y_ptr, n, stride, STEP: tl.constexpr):
    r = tl.program_id(0)
    total = 0.0
    for start in range(0, n, STEP):
        cols = start + tl.arange(0, STEP)
        total += tl.sum(tl.load(x_ptr + r * stride + cols, mask=cols < n, other=0.0), 0)
    tl.store(y_ptr + r, total)


def launch(x):
    y = torch.empty(x.shape[0], device=x.device)
    row_total[(x.shape[0],)](x, y, x.shape[1], x.stride(0), STEP=32)
    return y
"""


def test_a_looped_reduction_without_a_scan_keeps_the_tile_and_the_floor() -> None:
    """SCAN_TILE is for scans only: a row total walked in chunks carries a per-row value too,
    and keeps TILE (4096) and the programs floor."""
    out = rewritten(LOOPED_SUM)
    assert "total = tl.full((ROWS, 1), 0.0, tl.float32)" in out
    assert (
        "ROWS = min(64, max(1, 4096 // 32), triton.next_power_of_2(x.shape[0]), "
        "triton.next_power_of_2(max(1, x.shape[0] // 1056)))"
    ) in out


def _scan_variant(old: str, new: str) -> str:
    assert old in ROW_SCAN
    return ROW_SCAN.replace(old, new)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        # each row would need its own trip count
        (_scan_variant("range(0, n, STEP)", "range(0, n - r, STEP)"), "bounds depend on the row"),
        # the carried value is replaced, not accumulated: its start is not a per-row total
        (_scan_variant("total += tl.sum(v, 0)", "total = tl.sum(v, 0)"), "not a per-row accumulator"),
        (_scan_variant("tl.cumsum(v, 0)", "tl.cumsum(v, axis=1)"), "not the row's"),
        (_scan_variant("for start in range(0, n, STEP):", "for start in tl.static_range(0, n, STEP):\n        if start:\n            pass"),
         "nested if"),
    ],
)  # fmt: skip
def test_row_scan_skips_say_why(source: str, reason: str) -> None:
    assert PASS.forward_sites(source) == []
    (why,) = PASS.why_not(source)[:1]
    assert reason in why, why


@pytest.mark.parametrize("name", ["column_mean_tall", "column_max_bf16", "column_softmax"])
def test_a_walk_down_a_column_is_left_to_column_tiling(name: str) -> None:
    """The program id added with unit stride to every pointer: a program owns a column, and
    packing such rows would be column tiling with the tile the wrong way round."""
    naive = (HELDOUT / name / "naive.py").read_text()
    assert PASS.forward_sites(naive) == []
    (why,) = PASS.why_not(naive)
    assert "the program id enters every pointer with unit stride" in why
    assert all_passes()["column_tiling"].forward_sites(naive)
