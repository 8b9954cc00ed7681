"""block_scan on a [1, BLOCK_N] tile (one row a program, widened by a unit axis): source rewrites
only, no kernels run. The golden kernel is the cumsum expert's CPU walk's simplest kernel (its
tile kernel with BLOCK_M = 1 rows, written out here, its comments trimmed): the row is scanned
in blocks along axis 1 with a [BLOCK_M, 1] fp32 carry, as the one-row naive kernel is."""

from __future__ import annotations

import ast

import pytest

from klineage.rewrite import all_passes
from klineage.rewrite.passes.block_scan import BlockScan
from tests.conftest import ROOT

SRC = ROOT / "src" / "klineage"
PASS = BlockScan()

WALKED = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

X_EVICTION_POLICY = "evict_first"


@triton.jit
def _cumsum_tile_kernel(
    X,
    Y,
    n_rows,
    n_cols,
    stride_x,
    stride_y,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    X_EVICTION: tl.constexpr,
):
    # Optimization 2: BLOCK_M rows per program.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    # int64 row offsets: M * N passes 2^31 at 1048576 x 4096.
    rows64 = rows.to(tl.int64)
    x = tl.load(
        X + rows64[:, None] * stride_x + cols[None, :],
        mask=mask,
        other=0.0)
    y = tl.cumsum(x.to(tl.float32), axis=1)
    tl.store(Y + rows64[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


def cumsum_forward(x):
    n_cols = x.shape[-1]
    x2 = x.contiguous().view(-1, n_cols)
    n_rows = x2.shape[0]
    y2 = torch.empty_like(x2)
    BLOCK_N = triton.next_power_of_2(n_cols)

    # Optimizations 1 and 2: the row is one tile; pack short rows BLOCK_M to a program.
    BLOCK_M = 1
    _cumsum_tile_kernel[(triton.cdiv(n_rows, BLOCK_M),)](
        x2,
        y2,
        n_rows,
        n_cols,
        x2.stride(0),
        y2.stride(0),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        X_EVICTION=X_EVICTION_POLICY,
    )
    return y2.view(x.shape)


class ModelNew(nn.Module):
    def forward(self, x):
        return cumsum_forward(x)
"""

KERNEL_BODY_AFTER = """
    # Optimization 2: BLOCK_M rows per program.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    carry = tl.zeros([BLOCK_M, 1], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        # int64 row offsets: M * N passes 2^31 at 1048576 x 4096.
        rows64 = rows.to(tl.int64)
        x = tl.load(
            X + rows64[:, None] * stride_x + cols[None, :],
            mask=mask,
            other=0.0)
        y = tl.cumsum(x.to(tl.float32), axis=1) + carry
        tl.store(Y + rows64[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
        carry += tl.sum(x.to(tl.float32), axis=1, keep_dims=True)


def cumsum_forward(x):
    n_cols = x.shape[-1]
    x2 = x.contiguous().view(-1, n_cols)
    n_rows = x2.shape[0]
    y2 = torch.empty_like(x2)
    BLOCK_N = triton.next_power_of_2(n_cols)

    # Optimizations 1 and 2: the row is one tile; pack short rows BLOCK_M to a program.
    BLOCK_M = 1
    # block_scan: at most 4096 columns, the cumsum expert's looped tile; blocks of BLOCK_N_ columns, an fp32 carried prefix
    BLOCK_N_ = min(4096, BLOCK_N)
    _cumsum_tile_kernel[(triton.cdiv(n_rows, BLOCK_M),)](
        x2,
        y2,
        n_rows,
        n_cols,
        x2.stride(0),
        y2.stride(0),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N_,
        X_EVICTION=X_EVICTION_POLICY,
    )
    return y2.view(x.shape)
"""


def rewritten(source: str, **params: object) -> str:
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site, dict(params))
    assert r.applied, r.reason
    assert r.source is not None and r.source != source
    ast.parse(r.source)
    return r.source


def test_golden_the_walked_one_row_tile_becomes_a_block_scan() -> None:
    (site,) = PASS.forward_sites(WALKED)
    assert site.params == {"kernel": "_cumsum_tile_kernel", "shape": "tile", "n": "n_cols"}
    assert "[BLOCK_M, BLOCK_N], one row a program" in site.description
    out = rewritten(WALKED)
    start = WALKED.index("\n    # Optimization 2: BLOCK_M rows")
    end = WALKED.index("\n\nclass ModelNew")
    assert WALKED[start:end] != KERNEL_BODY_AFTER
    assert out == WALKED[:start] + KERNEL_BODY_AFTER + WALKED[end:]


def test_fixed_block_n_and_not_a_site_again() -> None:
    out = rewritten(WALKED, block_n=16)
    assert "    BLOCK_N_ = 16\n" in out
    assert PASS.forward_sites(out) == []
    assert "already scans blocks" in " ".join(PASS.why_not(out))


def test_a_literal_unit_side_and_a_scalar_row_are_sites_too() -> None:
    literal = WALKED.replace("BLOCK_M=BLOCK_M,", "BLOCK_M=1,")
    assert "carry = tl.zeros([BLOCK_M, 1], dtype=tl.float32)" in rewritten(literal)
    # no row arange: a scalar row and the columns made [1, BLOCK_N] by [None, :]
    scalar = WALKED.replace(
        "rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)", "rows = tl.program_id(0)"
    ).replace("rows64[:, None]", "rows64")
    out = rewritten(scalar)
    assert "carry = tl.zeros([1, 1], dtype=tl.float32)" in out
    assert "carry += tl.sum(x.to(tl.float32), axis=1, keep_dims=True)" in out


def test_the_corpus_expert_still_has_no_site() -> None:
    expert = (SRC / "kernels" / "cumsum" / "expert.py").read_text(encoding="utf-8")
    assert PASS.forward_sites(expert) == []
    tile, *_ = (r for r in PASS.why_not(expert) if r.startswith("_cumsum_tile_kernel"))
    # its tile scans by scan_dot's helper, no tl.cumsum; with that step walked back ...
    assert tile == "_cumsum_tile_kernel: no tl.cumsum calls: one scan of the row is rewritten"
    scan_dot = all_passes()["scan_dot"]
    expert = scan_dot.simplify(expert, scan_dot.backward_sites(expert)[0]).source
    assert PASS.forward_sites(expert) == []
    tile, *_ = PASS.why_not(expert)
    # ... its tile kernel packs BLOCK_M rows a program: not one row, not this pass's site
    assert tile.startswith("_cumsum_tile_kernel: 2 tl.arange calls (BLOCK_M=min(max(")
    assert "not one of them one lane" in tile


LOAD = "X + rows64[:, None] * stride_x + cols[None, :]"


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        # several rows a program: a [BLOCK_M, BLOCK_N] tile is not one row
        ("    BLOCK_M = 1\n", "    BLOCK_M = 2\n", "not one of them one lane"),
        # the unit side bound twice in the launcher: its value is not known
        ("    BLOCK_M = 1\n", "    BLOCK_M = 1\n    BLOCK_M += 0\n", "not one of them one lane"),
        # a scan along the unit axis, not the row
        ("axis=1)", "axis=0)", "a scan over axis 0, not the tile's columns (axis 1)"),
        # the columns put along axis 0
        (LOAD, "X + rows64[:, None] * stride_x + cols[:, None]", "the row's columns along tile axis 0"),
        # a row value along the columns' axis
        (LOAD, "X + rows64[None, :] * stride_x + cols[None, :]", "does not depend on the columns along"),
        # the column mask dropped: the last block's lanes past n_cols would be stored
        ("mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]", "mask = (rows < n_rows)[:, None]",
         "not masked by `cols < n`"),
        # a column mask that also reads the columns another way
        ("& (cols < n_cols)[None, :]", "& (cols < n_cols)[None, :] & (cols % 2 == 0)[None, :]",
         "not masked by `cols < n`"),
        # the scan in the input's type
        ("tl.cumsum(x.to(tl.float32), axis=1)", "tl.cumsum(x, axis=1)", "not set once to an fp32"),
        # a reduction over the tile besides the scan
        ("y = tl.cumsum(", "z = tl.sum(x, axis=1)\n    y = tl.cumsum(", "not known to work lane by lane"),
        # any other indexing
        ("cols[None, :],\n", "cols[None, :][0],\n", "indexing"),
        # a tile that does not cover the row
        ("    BLOCK_N = triton.next_power_of_2(n_cols)\n", "    BLOCK_N = 1024\n", "may not cover the row"),
    ],
)  # fmt: skip
def test_what_it_cannot_prove_is_skipped_with_the_reason(old: str, new: str, reason: str) -> None:
    assert old in WALKED
    source = WALKED.replace(old, new)
    assert PASS.forward_sites(source) == []
    (why,) = PASS.why_not(source)
    assert reason in why, why
