"""tiled_transpose on a tile program with one side of one lane (rewrite/passes/tiled_transpose_tile.py):
source rewrites only, no kernels run. The golden kernel is the transpose expert's CPU walk's
simplest kernel (the [1, 32] tile through tl.trans, written out here, its comments trimmed): its
grid and its launch get a 64 x 64 tile, the kernel stays as it is."""

from __future__ import annotations

import ast

import pytest

from klineage.rewrite.passes.tiled_transpose import TiledTranspose
from tests.conftest import ROOT

SRC = ROOT / "src" / "klineage"
PASS = TiledTranspose()

# the transpose walk's last kernel: BLOCK_M_SIZE walked back to 1, BLOCK_N_SIZE to 32, the
# grouped order to a row-major split of the program id, the even path and the hints removed
WALKED = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

# Optimization 1 (tile): 64 x 64 elements.
BLOCK_M_SIZE = 1
BLOCK_N_SIZE = 32
GROUP_M_SIZE = 8
NUM_WARPS = 4


@triton.jit
def _transpose_kernel(
    X,
    Y,
    M,
    N,
    stride_xm,
    stride_yn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # int64 offsets: M * N passes 2^31 at 65536 x 65536.
    src = X + rm.to(tl.int64)[:, None] * stride_xm + rn[None, :]
    dst = Y + rn.to(tl.int64)[:, None] * stride_yn + rm[None, :]
    x = tl.load(
        src,
        mask=(rm < M)[:, None] & (rn < N)[None, :],
        other=0.0)
    tl.store(dst, tl.trans(x), mask=(rn < N)[:, None] & (rm < M)[None, :])


def transpose_forward(x):
    M, N = x.shape
    x = x.contiguous()
    y = torch.empty((N, M), dtype=x.dtype, device=x.device)
    # A 1-D grid: a 2-D one would cap the tile rows at 65535 (CUDA's grid y limit).
    grid = (triton.cdiv(M, BLOCK_M_SIZE) * triton.cdiv(N, BLOCK_N_SIZE),)
    _transpose_kernel[grid](
        x,
        y,
        M,
        N,
        x.stride(0),
        y.stride(0),
        BLOCK_M=BLOCK_M_SIZE,
        BLOCK_N=BLOCK_N_SIZE,
        GROUP_M=GROUP_M_SIZE,
    )
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return transpose_forward(x)
"""

LAUNCHER_AFTER = """
def transpose_forward(x):
    M, N = x.shape
    x = x.contiguous()
    y = torch.empty((N, M), dtype=x.dtype, device=x.device)
    # A 1-D grid: a 2-D one would cap the tile rows at 65535 (CUDA's grid y limit).
    grid = (triton.cdiv(M, 64) * triton.cdiv(N, 64),)
    # tiled_transpose: a [64, 64] tile of the source a program, not [1, 32] (one line of it): the load and the store both along whole lines
    _transpose_kernel[grid](
        x,
        y,
        M,
        N,
        x.stride(0),
        y.stride(0),
        BLOCK_M=64,
        BLOCK_N=64,
        GROUP_M=GROUP_M_SIZE,
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


def test_golden_the_walked_one_row_tile_becomes_a_64_by_64_tile() -> None:
    (site,) = PASS.forward_sites(WALKED)
    assert (
        site.description
        == "_transpose_kernel: a [1, 32] tile of the source a program (part of one line)"
    )
    assert site.params == {"kernel": "_transpose_kernel", "block_m": 64, "block_n": 64}
    out = rewritten(WALKED)
    start, end = WALKED.index("\ndef transpose_forward"), WALKED.index("\n\nclass ModelNew")
    assert WALKED[start:end] != LAUNCHER_AFTER
    assert out == WALKED[:start] + LAUNCHER_AFTER + WALKED[end:]  # the kernel as it was


def test_tile_sides_from_params_and_not_a_site_again() -> None:
    out = rewritten(WALKED, block_m=16, block_n=32)
    assert "grid = (triton.cdiv(M, 16) * triton.cdiv(N, 32),)" in out
    assert "        BLOCK_M=16,\n        BLOCK_N=32,\n" in out
    assert PASS.forward_sites(out) == []
    (why,) = PASS.why_not(out)
    assert "neither of the tile's sides one lane at the launch (BLOCK_M=16, BLOCK_N=32)" in why
    bad = PASS.apply(WALKED, PASS.forward_sites(WALKED)[0], {"block_m": 48})
    assert not bad.applied and "power of two" in bad.reason


def test_a_column_a_program_and_a_two_d_grid_are_sites_too() -> None:
    # [32, 1]: one column of x a program, 32 rows at a time; the store is the contiguous side
    column = WALKED.replace(
        "BLOCK_M_SIZE = 1\nBLOCK_N_SIZE = 32", "BLOCK_M_SIZE = 32\nBLOCK_N_SIZE = 1"
    )
    (site,) = PASS.forward_sites(column)
    assert "a [32, 1] tile" in site.description
    assert "grid = (triton.cdiv(M, 64) * triton.cdiv(N, 64),)" in rewritten(column)
    # the coordinates on two grid axes instead of a split program id
    two_d = (
        WALKED.replace("    pid = tl.program_id(0)\n    num_pid_n = tl.cdiv(N, BLOCK_N)\n", "")
        .replace("pid_m = pid // num_pid_n", "pid_m = tl.program_id(0)")
        .replace("pid_n = pid % num_pid_n", "pid_n = tl.program_id(1)")
        .replace(
            "grid = (triton.cdiv(M, BLOCK_M_SIZE) * triton.cdiv(N, BLOCK_N_SIZE),)",
            "grid = (triton.cdiv(M, BLOCK_M_SIZE), triton.cdiv(N, BLOCK_N_SIZE))",
        )
    )
    assert "grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))" in rewritten(two_d)


def test_the_corpus_expert_still_has_no_site() -> None:
    expert = (SRC / "kernels" / "transpose" / "expert.py").read_text(encoding="utf-8")
    assert PASS.forward_sites(expert) == []
    (why,) = PASS.why_not(expert)
    assert "decorators besides @triton.jit" in why
    # without its heuristics it is still no site: its even path is a branch
    bare = expert.replace("@triton.heuristics(", "_unused = (")
    assert PASS.forward_sites(bare) == []
    assert "a if statement" in " ".join(PASS.why_not(bare))


MASK_LOAD = "mask=(rm < M)[:, None] & (rn < N)[None, :]"
STORE = "tl.store(dst, tl.trans(x), mask=(rn < N)[:, None] & (rm < M)[None, :])"
GRID = "grid = (triton.cdiv(M, BLOCK_M_SIZE) * triton.cdiv(N, BLOCK_N_SIZE),)"


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        # already a 2-D tile: nothing of one line to widen
        ("BLOCK_M_SIZE = 1\n", "BLOCK_M_SIZE = 2\n", "neither of the tile's sides one lane"),
        # the unit side's mask dropped: right at [1, 32], the tiles past M at 64 rows
        (STORE, "tl.store(dst, tl.trans(x), mask=(rn < N)[:, None])", "not both masked by `rm < n`"),
        # a grid that counts the tiles with another side than the launch passes
        (GRID, "grid = (triton.cdiv(M, BLOCK_M_SIZE) * triton.cdiv(N, 32),)", "not (X * D,) with D = cdiv(N, BLOCK_N_SIZE)"),
        # D counts the columns in blocks of the other side
        ("num_pid_n = tl.cdiv(N, BLOCK_N)", "num_pid_n = tl.cdiv(N, BLOCK_M)", "is not tl.cdiv(N, BLOCK_N)"),
        # the stored tile not exchanged: the value's axes and the address's disagree
        (STORE, STORE.replace("tl.trans(x)", "x"), "on both axes of the tile"),
        # the two sides' vectors added as vectors: how they pair changes with the tile
        ("+ rn[None, :]\n", "+ (rn + rm * 0)[None, :]\n", "the two sides' vectors combined"),
        # a side along the other's axis
        (MASK_LOAD, "mask=(rm < M)[None, :] & (rn < N)[None, :]", "both sides on one axis"),
        # an in-place transpose
        ("dst = Y + ", "dst = X + ", "in-place"),
        # the program id read besides its split
        ("src = X + ", "src = pid + X + ", "is read besides the sides' `c * B`"),
        # a block read besides its side
        ("src = X + ", "src = BLOCK_N + X + ", "is read besides the sides' `c * B`"),
        # the stored value computed from the loaded one
        ("tl.trans(x),", "tl.trans(x) * 2,", "not the loaded one"),
        # any other indexing
        ("rn[None, :]\n", "rn[None, :][0]\n", "indexing"),
        # a tile constant the launcher binds twice
        ("    M, N = x.shape\n", "    M, N = x.shape\n    M = M + 0\n", "binds more than once"),
    ],
)  # fmt: skip
def test_what_it_cannot_prove_is_skipped_with_the_reason(old: str, new: str, reason: str) -> None:
    assert old in WALKED
    source = WALKED.replace(old, new)
    assert PASS.forward_sites(source) == []
    (why,) = PASS.why_not(source)
    assert reason in why, why


def test_a_plain_copy_is_not_a_transpose() -> None:
    # contiguous along the columns on both sides: coalesced already
    source = WALKED.replace(
        "dst = Y + rn.to(tl.int64)[:, None] * stride_yn + rm[None, :]",
        "dst = Y + rm.to(tl.int64)[:, None] * stride_yn + rn[None, :]",
    ).replace(STORE, f"tl.store(dst, x, {MASK_LOAD})")
    assert PASS.forward_sites(source) == []
    (why,) = PASS.why_not(source)
    assert "contiguous along the same side" in why, why
