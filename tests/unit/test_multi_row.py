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
        (_variant("    x = tl.load(", "    for k in range(2):\n        pass\n    x = tl.load("),
         "for statement"),
        (_variant("row = tl.program_id(0)", "row = tl.program_id(1)"), "axis 0"),
        (_variant("tl.sum(x, 0)", "tl.sum(tl.dot(x, x), 0)"), "tl.dot"),
        (_variant("cols = tl.arange(0, BLOCK)", "cols = tl.arange(0, BLOCK)[None, :]"),
         "2-D tile"),
        (_variant("tl.store(y_ptr + row, tl.sum(x, 0))", "tl.atomic_add(y_ptr + row, tl.sum(x, 0))"),
         "atomics"),
        (_variant("tl.sum(x, 0)", "tl.cumsum(x, 0)"), "tl.cumsum"),
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
