"""The column_tiling pass (rewrite/passes/column_tiling.py): source rewrites only, no kernels
run. The golden kernels are written for these tests (a serial walk one row a step; a while loop
over row blocks with a vector accumulator), not the corpus' or held-out shapes."""

from __future__ import annotations

import ast

import pytest

from klineage.rewrite import all_passes
from klineage.rewrite.passes.column_tiling import ColumnTiling
from tests.conftest import ROOT

SRC = ROOT / "src" / "klineage"
PASS = ColumnTiling()

# one row a step, scalar loads, a min accumulator started from a literal, no tl.arange
WALK = """
import torch
import triton
import triton.language as tl


@triton.jit
def lowest_per_column(a, out, n, lda):
    k = tl.program_id(0)
    lo = float("inf")
    for i in range(n):
        lo = tl.minimum(lo, tl.load(a + i * lda + k).to(tl.float32))
    tl.store(out + k, lo)


def column_min(a):
    out = torch.empty(a.shape[1], device=a.device)
    lowest_per_column[(a.shape[1],)](a, out, a.shape[0], a.stride(0))
    return out
"""

WALK_AFTER = """
import torch
import triton
import triton.language as tl


@triton.jit
def lowest_per_column(a, out, n, lda, n_cols, BLOCK_N: tl.constexpr):
    cols = (tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]
    col_ok = cols < n_cols
    k = cols
    lo = tl.full((1, BLOCK_N), float("inf"), tl.float32)
    for i in range(n):
        lo = tl.minimum(lo, tl.load(a + i * lda + k, mask=col_ok).to(tl.float32))
    tl.store(out + k, lo, mask=col_ok)


def column_min(a):
    out = torch.empty(a.shape[1], device=a.device)
    # column_tiling: a [rows, BLOCK_N] tile of about 4096 elements, at most 256 columns; loads coalesced along the columns
    BLOCK_N = min(256, max(1, 4096 // 1), triton.next_power_of_2(a.shape[1]))
    lowest_per_column[(triton.cdiv(a.shape[1], BLOCK_N),)](a, out, a.shape[0], a.stride(0), n_cols=a.shape[1], BLOCK_N=BLOCK_N)
    return out
"""

# a while loop over row blocks of R, a [R] accumulator, an int64 column, one argument a line
BLOCKS = """
import torch
import triton
import triton.language as tl


@triton.jit
def col_rms(
    x_ptr,
    y_ptr,
    height,
    stride,
    R: tl.constexpr,
):
    'sqrt(mean(x[:, j] ** 2)) for the column j'
    j = tl.program_id(0).to(tl.int64)
    sq = tl.zeros([R], dtype=tl.float32)
    t = 0
    while t < height:
        r = t + tl.arange(0, R)
        v = tl.load(x_ptr + r * stride + j, mask=r < height, other=0.0).to(tl.float32)
        sq += v * v
        t += R
    tl.store(y_ptr + j, tl.sqrt(tl.sum(sq, axis=0) / height))


def column_rms(x):
    y = torch.empty(x.shape[1], device=x.device)
    col_rms[(x.shape[1],)](
        x,
        y,
        x.shape[0],
        x.stride(0),
        R=8,
    )
    return y
"""

BLOCKS_AFTER = """
import torch
import triton
import triton.language as tl


@triton.jit
def col_rms(
    x_ptr,
    y_ptr,
    height,
    stride,
    R: tl.constexpr,
    n_cols,
    BLOCK_N: tl.constexpr,
):
    'sqrt(mean(x[:, j] ** 2)) for the column j'
    cols = (tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]
    col_ok = cols < n_cols
    j = cols.to(tl.int64)
    sq = tl.zeros([R, BLOCK_N], dtype=tl.float32)
    t = 0
    while t < height:
        r = t + tl.arange(0, R)[:, None]
        v = tl.load(x_ptr + r * stride + j, mask=(r < height) & col_ok, other=0.0).to(tl.float32)
        sq += v * v
        t += R
    tl.store(y_ptr + j, tl.sqrt(tl.sum(sq, axis=0, keep_dims=True) / height), mask=col_ok)


def column_rms(x):
    y = torch.empty(x.shape[1], device=x.device)
    # column_tiling: fixed; loads coalesced along the columns
    BLOCK_N = 16
    col_rms[(triton.cdiv(x.shape[1], BLOCK_N),)](
        x,
        y,
        x.shape[0],
        x.stride(0),
        R=8,
        n_cols=x.shape[1],
        BLOCK_N=BLOCK_N,
    )
    return y
"""


def rewritten(source: str, **params: object) -> str:
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site, dict(params))
    assert r.applied, r.reason
    assert r.source is not None and r.source != source
    ast.parse(r.source)
    return r.source


def test_golden_serial_walk_one_row_a_step() -> None:
    assert WALK_AFTER != WALK
    assert rewritten(WALK) == WALK_AFTER


def test_golden_while_loop_over_row_blocks_with_fixed_block_n() -> None:
    assert BLOCKS_AFTER != BLOCKS
    assert rewritten(BLOCKS, block_n=16) == BLOCKS_AFTER


def test_registered_and_forward_only() -> None:
    assert isinstance(all_passes()["column_tiling"], ColumnTiling)
    assert PASS.backward_sites(WALK_AFTER) == []
    # the rewritten kernel is no longer one column per program
    assert PASS.forward_sites(WALK_AFTER) == []


@pytest.mark.parametrize(
    ("path", "lines"),
    [
        ("kernels/colsum/naive.py", ["acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
                                     "BLOCK_N = min(256, max(1, 4096 // 128), triton.next_power_of_2(N))"]),
        ("heldout/column_mean_tall/naive.py", ["total = tl.full((1, BLOCK_N), 0.0, tl.float32)",
                                               "mask=(r < n_rows) & col_ok"]),
        ("heldout/column_max_bf16/naive.py", ["j = cols.to(tl.int64)",
                                              "best = tl.full((1, BLOCK_N), float(\"-inf\"), tl.float32)"]),
        ("heldout/column_softmax/naive.py", ["denom = tl.full((1, BLOCK_N), 0.0, tl.float32)",
                                             "mask=(r < M) & col_ok)"]),
    ],
)  # fmt: skip
def test_the_column_reduction_targets_are_sites(path: str, lines: list[str]) -> None:
    out = rewritten((SRC / path).read_text(encoding="utf-8"))
    assert "cols = (tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]" in out
    assert "(triton.cdiv(" in out
    for line in lines:
        assert line in out


def test_params_block_n_must_be_a_power_of_two() -> None:
    (site,) = PASS.forward_sites(WALK)
    r = PASS.apply(WALK, site, {"block_n": 24})
    assert not r.applied and "power of two" in r.reason


def _skip_reason(source: str) -> str:
    assert PASS.forward_sites(source) == []
    (why,) = PASS.why_not(source)
    return why


def _kernel(body: str, grid: str = "(a.shape[1],)") -> str:
    head = WALK.split("    k = tl.program_id(0)")[0]
    launch = "\n\ndef column_min(a):\n    out = torch.empty(a.shape[1], device=a.device)\n"
    launch += f"    lowest_per_column[{grid}](a, out, a.shape[0], a.stride(0))\n    return out\n"
    return head + body + launch


@pytest.mark.parametrize(
    ("body", "grid", "reason"),
    [
        # the loop carries the previous row, not an accumulator
        ("    k = tl.program_id(0)\n    prev = 0.0\n    for i in range(n):\n"
         "        prev = tl.load(a + i * lda + k)\n    tl.store(out + k, prev)\n",
         "(a.shape[1],)", "not a per-column accumulator"),
        # a row kernel: the program id is multiplied by the row pitch
        ("    k = tl.program_id(0)\n    s = 0.0\n    for i in range(n):\n"
         "        s += tl.load(a + k * lda + i)\n    tl.store(out + k, s)\n",
         "(a.shape[1],)", "not added once with unit stride"),
        # each column walks its own number of rows
        ("    k = tl.program_id(0)\n    s = 0.0\n    for i in range(k):\n"
         "        s += tl.load(a + i * lda + k)\n    tl.store(out + k, s)\n",
         "(a.shape[1],)", "bounds depend on the column"),
        # every program writes the same place
        ("    k = tl.program_id(0)\n    s = 0.0\n    for i in range(n):\n"
         "        s += tl.load(a + i * lda + k)\n    tl.store(out, s)\n",
         "(a.shape[1],)", "does not depend on the column"),
        # an elementwise column scale: nothing is reduced
        ("    k = tl.program_id(0)\n    for i in range(n):\n"
         "        tl.store(out + i * lda + k, tl.load(a + i * lda + k) * 2)\n",
         "(a.shape[1],)", "reduces nothing"),
        # a branch in the kernel
        ("    k = tl.program_id(0)\n    s = 0.0\n    if n > 0:\n"
         "        s = tl.load(a + k)\n    tl.store(out + k, s)\n",
         "(a.shape[1],)", "a if statement"),
        # a nested loop
        ("    k = tl.program_id(0)\n    s = 0.0\n    for i in range(n):\n        for q in range(2):\n"
         "            s += tl.load(a + i * lda + k)\n    tl.store(out + k, s)\n",
         "(a.shape[1],)", "nested for"),
        # a grid that is not a literal 1-tuple
        ("    k = tl.program_id(0)\n    s = 0.0\n    for i in range(n):\n"
         "        s += tl.load(a + i * lda + k)\n    tl.store(out + k, s)\n",
         "grid", "not a literal 1-D tuple"),
        # an accumulator that starts from a load
        ("    k = tl.program_id(0)\n    s = tl.load(a + k)\n    for i in range(1, n):\n"
         "        s += tl.load(a + i * lda + k)\n    tl.store(out + k, s)\n",
         "(a.shape[1],)", "only a literal or a 1-D tl.zeros/tl.full start"),
    ],
)  # fmt: skip
def test_what_it_cannot_prove_is_skipped_with_the_reason(body: str, grid: str, reason: str) -> None:
    assert reason in _skip_reason(_kernel(body, grid))


def test_row_kernels_and_experts_are_not_sites() -> None:
    for path in ["kernels/colsum/expert.py", "kernels/softmax/naive.py", "heldout/rmsnorm_gemma/naive.py",
                 "kernels/transpose/naive.py", "heldout/reverse_cumsum_rows/naive.py"]:  # fmt: skip
        assert PASS.forward_sites((SRC / path).read_text(encoding="utf-8")) == [], path


# the expert's shape (column_tiling_expert.py), written for the test: 2-D tiles of TN columns
TILED = """
import torch
import triton
import triton.language as tl


@triton.jit
def tile_colmax(src, dst, n_rows, n_cols, pitch, TM: tl.constexpr, TN: tl.constexpr):
    c = tl.program_id(0) * TN + tl.arange(0, TN)
    r = tl.arange(0, TM)
    best = tl.full([TN], float("-inf"), tl.float32)
    for top in range(0, n_rows, TM):
        rows = top + r
        ok = (rows[:, None] < n_rows) & (c[None, :] < n_cols)
        v = tl.load(src + rows[:, None] * pitch + c[None, :], mask=ok, other=float("-inf"))
        best = tl.maximum(best, tl.max(v, axis=0))
    tl.store(dst + c, best, mask=c < n_cols)


def column_max(x):
    y = torch.empty(x.shape[1], device=x.device)
    tn = min(128, triton.next_power_of_2(x.shape[1]))
    tile_colmax[(triton.cdiv(x.shape[1], tn),)](x, y, x.shape[0], x.shape[1], x.stride(0), TM=32, TN=tn)
    return y
"""

TILED_ONE = TILED.replace("tn = min(128, triton.next_power_of_2(x.shape[1]))", "tn = 1")


def test_golden_backward_one_column_per_program_and_forward_restores_it() -> None:
    assert TILED_ONE != TILED
    (site,) = PASS.backward_sites(TILED)
    assert site.params["value"] == "min(128, triton.next_power_of_2(x.shape[1]))"
    r = PASS.simplify(TILED, site)
    assert r.applied and r.source == TILED_ONE, r.reason
    assert PASS.backward_sites(TILED_ONE) == []
    (fwd,) = PASS.forward_sites(TILED_ONE)
    back = PASS.apply(TILED_ONE, fwd, dict(site.params))
    assert back.applied and back.source == TILED, back.reason
    # without the expert's expression there is nothing to restore
    assert "params['value']" in PASS.apply(TILED_ONE, fwd).reason


def test_colsum_expert_backward_is_one_column_per_program() -> None:
    expert = (SRC / "kernels" / "colsum" / "expert.py").read_text(encoding="utf-8")
    (site,) = PASS.backward_sites(expert)
    assert site.function == "colsum_forward" and site.params["name"] == "BLOCK_N"
    r = PASS.simplify(expert, site)
    assert r.applied and r.source is not None, r.reason
    assert "    BLOCK_N = 1\n" in r.source
    (fwd,) = PASS.forward_sites(r.source)
    assert PASS.apply(r.source, fwd, dict(site.params)).source == expert


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the columns along the tile's strided dimension: not a column tiling to undo
        ("src + rows[:, None] * pitch + c[None, :]", "src + c[:, None] * pitch + rows[None, :]"),
        # the launcher variable is also passed as an ordinary argument
        ("x.shape[1], x.stride(0), TM=32", "tn, x.stride(0), TM=32"),
        # no reduction over the rows
        ("best = tl.maximum(best, tl.max(v, axis=0))", "best = tl.maximum(best, v)"),
    ],
)
def test_backward_needs_the_column_tiled_shape(old: str, new: str) -> None:
    assert old in TILED
    assert PASS.backward_sites(TILED.replace(old, new)) == []
