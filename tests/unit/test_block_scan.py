"""The block_scan pass (rewrite/passes/block_scan.py): source rewrites only, no kernels run.
The serial kernel (one element a step, a scalar running sum) is written for these tests; the
one-tile shape is the cumsum corpus naive."""

from __future__ import annotations

import ast

import pytest

from klineage.rewrite import all_passes
from klineage.rewrite.passes.block_scan import BlockScan
from tests.conftest import ROOT

SRC = ROOT / "src" / "klineage"
PASS = BlockScan()

# shape (a): one program per row, one element a step, a scalar fp32 running sum
SERIAL = """
import torch
import triton
import triton.language as tl


@triton.jit
def running_sum_row(x_ptr, y_ptr, n_cols, stride):
    row = tl.program_id(0)
    acc = 0.0
    for j in range(n_cols):
        v = tl.load(x_ptr + row * stride + j).to(tl.float32)
        acc += v
        tl.store(y_ptr + row * stride + j, acc)


def row_cumsum(x):
    y = torch.empty_like(x, dtype=torch.float32)
    running_sum_row[(x.shape[0],)](x, y, x.shape[1], x.stride(0))
    return y
"""

SERIAL_AFTER = """
import torch
import triton
import triton.language as tl


@triton.jit
def running_sum_row(x_ptr, y_ptr, n_cols, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    acc = 0.0
    for start in range(0, n_cols, BLOCK_N):
        j = start + tl.arange(0, BLOCK_N)
        j_ok = j < n_cols
        v = tl.load(x_ptr + row * stride + j, mask=j_ok).to(tl.float32)
        acc_scan = tl.cumsum(v, axis=0) + acc
        tl.store(y_ptr + row * stride + j, acc_scan, mask=j_ok)
        acc += tl.sum(v, axis=0)


def row_cumsum(x):
    y = torch.empty_like(x, dtype=torch.float32)
    # block_scan: at most 4096 columns, the cumsum expert's looped tile; blocks of BLOCK_N columns, an fp32 carried prefix
    BLOCK_N = min(4096, triton.next_power_of_2(x.shape[1]))
    running_sum_row[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK_N=BLOCK_N)
    return y
"""

# the corpus naive's kernel after the rewrite (shape (b)), at a fixed BLOCK_N
TILE_KERNEL_AFTER = """
def _cumsum_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = 0.0
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.cumsum(x, axis=0) + carry
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)
"""


def rewritten(source: str, **params: object) -> str:
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site, dict(params))
    assert r.applied, r.reason
    assert r.source is not None and r.source != source
    ast.parse(r.source)
    return r.source


def test_golden_serial_loop_becomes_a_block_scan() -> None:
    assert SERIAL_AFTER != SERIAL
    assert rewritten(SERIAL) == SERIAL_AFTER


def test_serial_with_fixed_block_n_a_start_and_the_total_read_after_the_loop() -> None:
    source = SERIAL.replace("range(n_cols)", "range(1, n_cols)").replace(
        "        tl.store(y_ptr + row * stride + j, acc)\n",
        "        tl.store(y_ptr + row * stride + j, acc * 2.0)\n    tl.store(y_ptr + row, acc)\n",
    )
    out = rewritten(source, block_n=16)
    assert "    for start in range(1, n_cols, BLOCK_N):\n" in out
    assert "tl.store(y_ptr + row * stride + j, acc_scan * 2.0, mask=j_ok)" in out
    # masked lanes of the last block must not enter the total that is stored after the loop
    assert (
        "        acc += tl.sum(tl.where(j_ok, v, 0.0), axis=0)\n    tl.store(y_ptr + row, acc)"
        in out
    )
    assert "    BLOCK_N = 16\n" in out and "BLOCK_N=BLOCK_N)" in out


def test_serial_element_inline_is_computed_once() -> None:
    source = SERIAL.replace(
        "        v = tl.load(x_ptr + row * stride + j).to(tl.float32)\n        acc += v\n",
        "        acc += tl.load(x_ptr + row * stride + j).to(tl.float32)\n",
    )
    out = rewritten(source)
    assert "acc_in = tl.load(x_ptr + row * stride + j, mask=j_ok).to(tl.float32)" in out
    assert "acc_scan = tl.cumsum(acc_in, axis=0) + acc" in out
    assert "acc += tl.sum(acc_in, axis=0)" in out


def test_corpus_cumsum_naive_tile_becomes_a_looped_block_scan() -> None:
    naive = (SRC / "kernels" / "cumsum" / "naive.py").read_text(encoding="utf-8")
    assert TILE_KERNEL_AFTER not in naive
    out = rewritten(naive, block_n=16)
    assert TILE_KERNEL_AFTER in out
    # the grid stays one program per row; the tile's launch value becomes the block
    assert "_cumsum_kernel[(x2.shape[0],)](" in out
    assert "    BLOCK_N = 16\n" in out and "        BLOCK_N=BLOCK_N,\n" in out
    default = rewritten(naive)
    assert "    BLOCK_N = min(4096, triton.next_power_of_2(n_cols))\n" in default


def test_forward_only_and_the_rewritten_kernels_are_not_sites_again() -> None:
    assert isinstance(all_passes()["block_scan"], BlockScan)
    expert = (SRC / "kernels" / "cumsum" / "expert.py").read_text(encoding="utf-8")
    assert PASS.backward_sites(expert) == []
    assert PASS.forward_sites(expert) == []
    assert PASS.forward_sites(SERIAL_AFTER) == []
    naive = (SRC / "kernels" / "cumsum" / "naive.py").read_text(encoding="utf-8")
    assert PASS.forward_sites(rewritten(naive)) == []


def test_params_block_n_must_be_a_power_of_two() -> None:
    (site,) = PASS.forward_sites(SERIAL)
    r = PASS.apply(SERIAL, site, {"block_n": 24})
    assert not r.applied and "power of two" in r.reason


def _skip_reason(source: str) -> str:
    assert PASS.forward_sites(source) == []
    (why,) = PASS.why_not(source)
    assert why
    return why


LOOP = "        v = tl.load(x_ptr + row * stride + j).to(tl.float32)\n        acc += v\n"
STORE = "        tl.store(y_ptr + row * stride + j, acc)\n"


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        # two carried values: a running sum and a running max
        ("    acc = 0.0\n", "    acc = 0.0\n    best = 0.0\n", None),
        # the value stored before the element is added: an exclusive scan
        (LOOP + STORE, "        v = tl.load(x_ptr + row * stride + j).to(tl.float32)\n" + STORE
         + "        acc += v\n", "exclusive scan"),
        # the running sum is stored at one place, not at the row's positions
        (STORE, "        tl.store(y_ptr + row, acc)\n", "writes elsewhere"),
        # the column read backwards: not at the positions it is stored at
        ("tl.load(x_ptr + row * stride + j)", "tl.load(x_ptr + row * stride + (n_cols - 1 - j))",
         "not added once with unit stride"),
        # the sum is kept in the input's type
        (".to(tl.float32)", "", "not made fp32"),
        # a running product, not a sum
        ("        acc += v\n", "        acc *= v\n", "not updated as `acc += <element>`"),
        # a loop that steps two columns at a time
        ("range(n_cols)", "range(0, n_cols, 2)", "does not step one element"),
        # a vector beside the loop: it would not broadcast with the loop's block
        ("    acc = 0.0\n", "    acc = 0.0\n    w = tl.load(x_ptr + tl.arange(0, 4))\n", "not scalars"),
        # a branch in the loop
        (STORE, "        if j > 0:\n    " + STORE, "one simple statement a line"),
    ],
)  # fmt: skip
def test_serial_shapes_it_cannot_prove_are_skipped_with_the_reason(
    old: str, new: str, reason: str | None
) -> None:
    assert old in SERIAL
    source = SERIAL.replace(old, new)
    if reason is None:  # the second carried value: make the loop update it
        source = source.replace(
            "        acc += v\n", "        acc += v\n        best = tl.maximum(best, v)\n"
        )
        reason = "the loop carries acc, best"
    assert reason in _skip_reason(source)


TILE_STORE = "tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)"


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        # a reversed scan: the carry would run the other way
        ("tl.cumsum(x, axis=0)", "tl.cumsum(x, axis=0, reverse=True)", "a reversed scan"),
        # the scan's total stored besides: a reduction over the tile
        (TILE_STORE, TILE_STORE + "\n    tl.store(Y + row, tl.sum(x, axis=0))",
         "not known to work lane by lane"),
        # every other column: not a row read contiguously
        ("X + row * stride_x + cols", "X + row * stride_x + cols * 2", "not added once with unit stride"),
        # a tile the launch does not make cover the row
        ("BLOCK_N=triton.next_power_of_2(n_cols)", "BLOCK_N=1024", "may not cover the row"),
        # the scan in the input's type
        (").to(tl.float32)\n", ")\n", "not set once to an fp32"),
        # a store without the column mask
        (", y.to(Y.dtype.element_ty), mask=mask)", ", y.to(Y.dtype.element_ty))", "not masked by"),
    ],
)  # fmt: skip
def test_tile_shapes_it_cannot_prove_are_skipped_with_the_reason(
    old: str, new: str, reason: str
) -> None:
    naive = (SRC / "kernels" / "cumsum" / "naive.py").read_text(encoding="utf-8")
    assert old in naive
    assert reason in _skip_reason(naive.replace(old, new))


def test_kernels_that_are_not_row_scans_are_not_sites() -> None:
    for path, reason in [
        ("heldout/reverse_cumsum_rows/naive.py", "already scans blocks"),
        ("kernels/softmax/naive.py", "no tl.cumsum"),
        ("kernels/colsum/naive.py", ""),
    ]:
        source = (SRC / path).read_text(encoding="utf-8")
        assert PASS.forward_sites(source) == [], path
        assert all(PASS.why_not(source)), path
        assert reason in " ".join(PASS.why_not(source)), path
