"""The tiled_transpose pass (rewrite/passes/tiled_transpose.py): source rewrites only, no kernels
run. The golden kernel is written for these tests (an fp16-ready transpose whose program copies
one row of x in a loop over column chunks, parameters one a line); the corpus transpose naive
(one program per column of x) and the held-out batched one (one program per row of a batch,
the program id split by // M and % M) are checked line by line."""

from __future__ import annotations

import ast

import pytest

from klineage.rewrite import all_passes
from klineage.rewrite.passes.tiled_transpose import TiledTranspose
from tests.conftest import ROOT

SRC = ROOT / "src" / "klineage"
PASS = TiledTranspose()

# one program per row of x (M, N); a loop copies the row CHUNK columns at a time into y's column
CHUNKED = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_to_column_chunks(
    src,
    dst,
    height,
    width,
    pitch,
    CHUNK: tl.constexpr,
):
    """Copy row r of src (height x width) into column r of dst (width x height)."""
    r = tl.program_id(0)
    # walk the row in chunks of CHUNK columns
    for start in range(0, width, CHUNK):
        c = start + tl.arange(0, CHUNK)
        inside = c < width
        v = tl.load(src + r * pitch + c, mask=inside, other=0.0)
        tl.store(dst + c.to(tl.int64) * height + r, v.to(dst.dtype.element_ty), mask=inside)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty((x.shape[1], x.shape[0]), dtype=x.dtype, device=x.device)
        row_to_column_chunks[(x.shape[0],)](x, y, x.shape[0], x.shape[1], x.stride(0), CHUNK=32)
        return y
'''

CHUNKED_AFTER = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_to_column_chunks(
    src,
    dst,
    height,
    width,
    pitch,
    CHUNK: tl.constexpr,
    n_rows,
    BLOCK_M: tl.constexpr,
):
    """Copy row r of src (height x width) into column r of dst (width x height)."""
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None]
    row_ok = rows < n_rows
    r = rows
    # walk the row in chunks of CHUNK columns
    start = tl.program_id(1) * CHUNK
    c = start + tl.arange(0, CHUNK)[None, :]
    inside = c < width
    v = tl.load(src + r * pitch + c, mask=inside & row_ok, other=0.0)
    tl.store(dst + c.to(tl.int64) * height + r, v.to(dst.dtype.element_ty), mask=inside & row_ok)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty((x.shape[1], x.shape[0]), dtype=x.dtype, device=x.device)
        # tiled_transpose: a [32, 16] tile of the source a program, loaded along its rows and stored along the destination's (Triton converts the tile through shared memory): both sides coalesced
        row_to_column_chunks[(triton.cdiv(x.shape[0], 32), triton.cdiv(x.shape[1], 16))](x, y, x.shape[0], x.shape[1], x.stride(0), CHUNK=16, n_rows=x.shape[0], BLOCK_M=32)
        return y
'''


def rewritten(source: str, **params: object) -> str:
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site, dict(params))
    assert r.applied, r.reason
    assert r.source is not None and r.source != source
    ast.parse(r.source)
    return r.source


def test_golden_row_copied_in_column_chunks() -> None:
    assert CHUNKED_AFTER != CHUNKED
    assert rewritten(CHUNKED, block_m=32, block_n=16) == CHUNKED_AFTER


def test_corpus_naive_one_column_of_x_a_program() -> None:
    out = rewritten((SRC / "kernels" / "transpose" / "naive.py").read_text(encoding="utf-8"))
    for line in [
        # x's columns (the program's index) along tile axis 1, its rows (the lanes) along 0
        "    cols = (tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]",
        "    col_ok = cols < n_cols",
        "    col = cols.to(tl.int64)",
        "    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None]",
        # masks on both dimensions, the rows' own mask kept
        "    x = tl.load(X + rows.to(tl.int64) * stride_xm + col, mask=mask & col_ok)",
        "    tl.store(Y + col * stride_yn + rows, x, mask=mask & col_ok)",
        "    _transpose_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](",
        "BLOCK_M=64, num_warps=4, n_cols=N, BLOCK_N=64",
    ]:
        assert line in out, line
    assert "BLOCK_M=triton.next_power_of_2" not in out


def test_heldout_batched_naive_one_row_of_a_matrix_a_program() -> None:
    path = SRC / "heldout" / "batched_transpose_last2" / "naive.py"
    out = rewritten(path.read_text(encoding="utf-8"))
    for line in [
        "def row_to_column(src, dst, M, N, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):",
        "    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None]",
        "    row_ok = rows < M",
        # the batch on grid axis 2, the row index the tile's rows
        "    b = tl.program_id(2)",
        "    m = rows",
        "    k = (tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]",
        "    vals = tl.load(src + base + m * N + k, mask=keep & row_ok)",
        "    tl.store(dst + base + k * M + m, vals, mask=keep & row_ok)",
        "row_to_column[(triton.cdiv(M, 64), triton.cdiv(N, 64), B)](x, y, M, N, BLOCK_N=64, BLOCK_M=64)",
    ]:
        assert line in out, line
    assert "pid" not in out  # the split program id is gone with its split


def test_registered_forward_only_and_not_again_on_its_output() -> None:
    assert isinstance(all_passes()["tiled_transpose"], TiledTranspose)
    after = rewritten(CHUNKED)
    assert PASS.forward_sites(after) == []
    assert PASS.backward_sites(CHUNKED) == PASS.backward_sites(after) == []
    (site,) = PASS.forward_sites(CHUNKED)
    assert not PASS.simplify(CHUNKED, site).applied


def test_the_corpus_expert_has_no_sites_either_way() -> None:
    expert = (SRC / "kernels" / "transpose" / "expert.py").read_text(encoding="utf-8")
    assert PASS.backward_sites(expert) == []
    assert PASS.forward_sites(expert) == []
    (why,) = PASS.why_not(expert)
    assert "decorators besides @triton.jit" in why


@pytest.mark.parametrize("params", [{"block_m": 48}, {"block_n": 0}, {"block_m": True}])
def test_tile_sides_must_be_powers_of_two(params: dict[str, object]) -> None:
    (site,) = PASS.forward_sites(CHUNKED)
    r = PASS.apply(CHUNKED, site, params)
    assert not r.applied and "power of two" in r.reason


def test_other_kernels_are_not_sites() -> None:
    for path in [
        "kernels/softmax/naive.py",
        "kernels/colsum/naive.py",
        "heldout/column_max_bf16/naive.py",
        "heldout/reverse_cumsum_rows/naive.py",
    ]:
        assert PASS.forward_sites((SRC / path).read_text(encoding="utf-8")) == [], path


# the corpus naive's shape, each case changing one thing the proof needs
FLAT = """
import triton
import triton.language as tl


@triton.jit
def t(X, Y, M, sx, sy, B: tl.constexpr):
    col = tl.program_id(0)
    rows = tl.arange(0, B)
    ok = rows < M
    v = tl.load(X + rows * sx + col, mask=ok)
    tl.store(Y + col * sy + rows, v, mask=ok)


def launch(x, y):
    t[(x.shape[1],)](x, y, x.shape[0], x.stride(0), y.stride(0), B=triton.next_power_of_2(x.shape[0]))
"""


# the lanes of FLAT, and the same walked in chunks of B by a loop (range and mask to fill in)
LANES = (
    "    rows = tl.arange(0, B)\n    ok = rows < M\n    v = tl.load(X + rows * sx + col, mask=ok)\n"
    "    tl.store(Y + col * sy + rows, v, mask=ok)\n"
)
LOOP = (
    "    for s in {range}:\n        rows = s + tl.arange(0, B)\n        ok = rows < M\n"
    "        v = tl.load(X + rows * sx + col, {mask})\n"
    "        tl.store(Y + col * sy + rows, v, {mask})\n"
)


def _skip_reason(source: str) -> str:
    assert PASS.forward_sites(source) == []
    (why,) = PASS.why_not(source)
    return why


def test_the_flat_case_itself_is_a_site() -> None:
    assert "t[(triton.cdiv(x.shape[0], 64), triton.cdiv(x.shape[1], 64))]" in rewritten(FLAT)


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        # two loads added: not a pure copy
        (
            "v = tl.load(X + rows * sx + col, mask=ok)",
            "v = tl.load(X + rows * sx + col, mask=ok) + tl.load(Y + rows * sx + col, mask=ok)",
            "2 loads and 1 stores",
        ),
        # the stored value is computed from the loaded one
        (
            "tl.store(Y + col * sy + rows, v, mask=ok)",
            "tl.store(Y + col * sy + rows, v * 2, mask=ok)",
            "not the loaded one",
        ),
        # a plain copy: contiguous along the lanes on both sides, coalesced already
        (
            "tl.store(Y + col * sy + rows, v, mask=ok)",
            "tl.store(Y + rows * sx + col, v, mask=ok)",
            "not a transpose",
        ),
        # the block is not shown to cover the lanes' bound
        ("B=triton.next_power_of_2(x.shape[0])", "B=128", "not shown to cover"),
        # the store is not masked by the lanes' bound
        (
            "tl.store(Y + col * sy + rows, v, mask=ok)",
            "tl.store(Y + col * sy + rows, v)",
            "not shown to cover",
        ),
        # a flipped (nonlinear in the parser's sense) address
        (
            "tl.store(Y + col * sy + rows, v, mask=ok)",
            "tl.store(Y + col * sy + (M - rows), v, mask=ok)",
            "not a parameter plus offsets linear",
        ),
        # an in-place transpose
        (
            "tl.store(Y + col * sy + rows, v, mask=ok)",
            "tl.store(X + col * sy + rows, v, mask=ok)",
            "in-place",
        ),
        # the lane block is read besides the arange
        ("ok = rows < M", "ok = rows < B", "B is used besides"),
        # a branch
        (
            "    col = tl.program_id(0)\n",
            "    col = tl.program_id(0)\n    if M > 0:\n        pass\n",
            "a if statement",
        ),
        # a name assigned twice
        ("ok = rows < M", "ok = rows < M\n    ok = rows < sx", "assigned more than once"),
        # a grid that is not a literal 1-tuple
        ("t[(x.shape[1],)]", "t[grid]", "not a literal 1-D tuple"),
        # a second program axis
        ("col = tl.program_id(0)", "col = tl.program_id(1)", "other than axis 0"),
        # the program id split, but used besides its split
        (
            "col = tl.program_id(0)",
            "pid = tl.program_id(0)\n    col = pid % M + pid // M + pid",
            "used besides its split",
        ),
        # the program id split, the grid not (batches * M,)
        (
            "col = tl.program_id(0)",
            "col = tl.program_id(0) // M + tl.program_id(0) % M",
            "is not (batches * x.shape[0],)",
        ),
        # a chunk loop whose step is not the lane block
        (
            "    rows = tl.arange(0, B)\n    ok = rows < M\n    v = tl.load(X + rows * sx + col, mask=ok)\n"
            "    tl.store(Y + col * sy + rows, v, mask=ok)\n",
            "    for s in range(0, M, 2 * B):\n        rows = s + tl.arange(0, B)\n        ok = rows < M\n"
            "        v = tl.load(X + rows * sx + col, mask=ok)\n        tl.store(Y + col * sy + rows, v, mask=ok)\n",
            "B is used besides",
        ),
        # a chunk loop stepping by something else than the lane block
        (
            LANES,
            LOOP.format(range="range(0, M, sx)", mask="mask=ok"),
            "the step is not the lane block B",
        ),
        # a chunk loop whose lanes are not masked by its stop: other chunk sizes reach past it
        (LANES, LOOP.format(range="range(0, M, B)", mask="mask=s < M"), "not both masked"),
        # a chunk loop that does not start at 0
        (
            "    rows = tl.arange(0, B)\n    ok = rows < M\n    v = tl.load(X + rows * sx + col, mask=ok)\n"
            "    tl.store(Y + col * sy + rows, v, mask=ok)\n",
            "    for s in range(1, M, B):\n        rows = s + tl.arange(0, B)\n        ok = rows < M\n"
            "        v = tl.load(X + rows * sx + col, mask=ok)\n        tl.store(Y + col * sy + rows, v, mask=ok)\n",
            "does not start at 0",
        ),
    ],
)
def test_what_it_cannot_prove_is_skipped_with_the_reason(old: str, new: str, reason: str) -> None:
    assert old in FLAT
    assert reason in _skip_reason(FLAT.replace(old, new))
