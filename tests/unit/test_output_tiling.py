"""The output_tiling pass (rewrite/passes/output_tiling.py): source rewrites only, no kernels
run. Golden rewrites of the held-out long-K matmul naive (a 1-D grid split by // and %) and of
a product written for these tests (a 2-D grid read in the other order, K-block vectors and
addresses named before and in the loop, `acc = acc + ...`, a scaled store, one argument a
line); the tiled kernel is split_k's site; no other corpus or held-out kernel is a site; what
is not proven is skipped with its reason. That the rewrites compute the same outputs is
tests/interp/test_output_tiling_gate.py's (the CPU gate)."""

from __future__ import annotations

import ast

import pytest

from klineage.rewrite import all_passes
from klineage.rewrite.passes.output_tiling import OutputTiling
from tests.conftest import ROOT

SRC = ROOT / "src" / "klineage"
PASS = OutputTiling()
LONG_K = SRC / "heldout" / "matmul_long_k_small_mn" / "naive.py"

LONG_K_AFTER = """@triton.jit
def dot_per_output(a_ptr, b_ptr, c_ptr, N, K, sa_m, sa_k, sb_k, sb_n, STEP: tl.constexpr, n_out_rows, n_out_cols, TILE_M: tl.constexpr, TILE_N: tl.constexpr):
    t = tl.program_id(0)
    i = (t // tl.cdiv(n_out_cols, TILE_N) * TILE_M + tl.arange(0, TILE_M))[:, None]
    j = (t % tl.cdiv(n_out_cols, TILE_N) * TILE_N + tl.arange(0, TILE_N))[None, :]
    part = tl.zeros((TILE_M, TILE_N), dtype=tl.float32)
    i_ok = i < n_out_rows
    j_ok = j < n_out_cols
    for k0 in range(0, K, STEP):
        kk = (k0 + tl.arange(0, STEP)).to(tl.int64)
        ok = kk < K
        a = tl.load(a_ptr + i * sa_m + kk[None, :] * sa_k, mask=ok[None, :] & i_ok, other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sb_k + j * sb_n, mask=ok[:, None] & j_ok, other=0.0)
        part += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + i * N + j, part.to(c_ptr.dtype.element_ty), mask=i_ok & j_ok)


class ModelNew(nn.Module):
    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), dtype=A.dtype, device=A.device)
        # output_tiling: a program computes a TILE_M x TILE_N tile of outputs with tl.dot (16 to
        # 64 lanes a side, 16 being tl.dot's least), reading A and B once per tile
        TILE_M = min(64, max(16, triton.next_power_of_2(M)))
        TILE_N = min(64, max(16, triton.next_power_of_2(N)))
        dot_per_output[(triton.cdiv(M, TILE_M) * triton.cdiv(N, TILE_N),)](
            A, B, C, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), STEP=64, n_out_rows=M, n_out_cols=N, TILE_M=TILE_M, TILE_N=TILE_N
        )
        return C
"""

PRODUCT = """import torch
import triton
import triton.language as tl


@triton.jit
def outer_dot(
    x,
    w,
    y,
    K,
    sxm,
    swn,
    sym,
    BK: tl.constexpr,
):
    'y[r, c] = 0.5 * sum_k x[r, k] * w[c, k], one program per output (w given as N x K)'
    c = tl.program_id(1)
    r = tl.program_id(0)
    x_row = x + r * sxm
    lanes = tl.arange(0, BK)
    acc = tl.zeros((BK,), dtype=tl.float32)
    for k in range(0, K, BK):
        ks = k + lanes
        inside = ks < K
        w_at = w + c * swn + ks
        xv = tl.load(x_row + ks, mask=inside, other=0.0)
        wv = tl.load(w_at, mask=inside, other=0.0)
        acc = acc + wv.to(tl.float32) * xv
    tl.store(y + r * sym + c, tl.sum(acc, axis=0) * 0.5)


def launch(x, w):
    y = torch.empty((x.shape[0], w.shape[0]), device=x.device, dtype=torch.float32)
    outer_dot[(x.shape[0], w.shape[0])](
        x,
        w,
        y,
        x.shape[1],
        x.stride(0),
        w.stride(0),
        y.stride(0),
        BK=32,
    )
    return y
"""

PRODUCT_AFTER = """import torch
import triton
import triton.language as tl


@triton.jit
def outer_dot(
    x,
    w,
    y,
    K,
    sxm,
    swn,
    sym,
    BK: tl.constexpr,
    n_out_rows,
    n_out_cols,
    TILE_M: tl.constexpr,
    TILE_N: tl.constexpr,
):
    'y[r, c] = 0.5 * sum_k x[r, k] * w[c, k], one program per output (w given as N x K)'
    c = (tl.program_id(0) % tl.cdiv(n_out_cols, TILE_N) * TILE_N + tl.arange(0, TILE_N))[None, :]
    r = (tl.program_id(0) // tl.cdiv(n_out_cols, TILE_N) * TILE_M + tl.arange(0, TILE_M))[:, None]
    x_row = x + r * sxm
    lanes = tl.arange(0, BK)
    acc = tl.zeros((TILE_M, TILE_N), dtype=tl.float32)
    r_ok = r < n_out_rows
    c_ok = c < n_out_cols
    for k in range(0, K, BK):
        ks = k + lanes
        inside = ks < K
        w_at = w + c * swn + ks[:, None]
        xv = tl.load(x_row + ks[None, :], mask=inside[None, :] & r_ok, other=0.0)
        wv = tl.load(w_at, mask=inside[:, None] & c_ok, other=0.0)
        acc += tl.dot(xv, wv, input_precision="ieee")
    tl.store(y + r * sym + c, acc * 0.5, mask=r_ok & c_ok)


def launch(x, w):
    y = torch.empty((x.shape[0], w.shape[0]), device=x.device, dtype=torch.float32)
    # output_tiling: a program computes a TILE_M x TILE_N tile of outputs with tl.dot (16 to
    # 64 lanes a side, 16 being tl.dot's least), reading A and B once per tile
    TILE_M = min(64, max(16, triton.next_power_of_2(x.shape[0])))
    TILE_N = min(64, max(16, triton.next_power_of_2(w.shape[0])))
    outer_dot[(triton.cdiv(x.shape[0], TILE_M) * triton.cdiv(w.shape[0], TILE_N),)](
        x,
        w,
        y,
        x.shape[1],
        x.stride(0),
        w.stride(0),
        y.stride(0),
        BK=32,
        n_out_rows=x.shape[0],
        n_out_cols=w.shape[0],
        TILE_M=TILE_M,
        TILE_N=TILE_N,
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


def test_golden_long_k_matmul_naive() -> None:
    source = LONG_K.read_text(encoding="utf-8")
    head = source[: source.index("@triton.jit")]
    assert head + LONG_K_AFTER != source
    assert rewritten(source) == head + LONG_K_AFTER


def test_golden_two_axis_product_read_in_the_other_order() -> None:
    assert PRODUCT_AFTER != PRODUCT
    assert rewritten(PRODUCT) == PRODUCT_AFTER


def test_fixed_tiles_and_their_checks() -> None:
    out = rewritten(PRODUCT, tile_m=32, tile_n=16)
    assert "    TILE_M = 32\n    TILE_N = 16\n" in out
    assert "(tiles fixed)" in " ".join(x.strip("# ") for x in out.splitlines())
    (site,) = PASS.forward_sites(PRODUCT)
    for bad in (8, 24, 0, True, "16"):
        r = PASS.apply(PRODUCT, site, {"tile_m": bad})
        assert not r.applied and "params['tile_m']" in r.reason, bad


def test_registered_forward_only_structural_and_the_tile_is_split_ks_site() -> None:
    assert isinstance(all_passes()["output_tiling"], OutputTiling)
    assert PASS.STRUCTURAL and not PASS.BY_PROGRAMS
    (site,) = PASS.forward_sites(PRODUCT)
    assert PASS.backward_sites(PRODUCT_AFTER) == []
    assert "has no backward rewrite" in PASS.simplify(PRODUCT_AFTER, site).reason
    assert PASS.forward_sites(PRODUCT_AFTER) == []
    # a tile alone leaves few programs walking all of K: split_k splits that loop next
    split = all_passes()["split_k"]
    for tiled in (PRODUCT_AFTER, rewritten(LONG_K.read_text(encoding="utf-8"))):
        (at,) = split.forward_sites(tiled)
        r = split.apply(tiled, at, {"split": 4})
        assert r.applied and r.source is not None, r.reason
        assert "_split_k_sum[(" in r.source and "+= tl.dot(" in r.source


def test_no_other_corpus_or_held_out_kernel_is_a_site() -> None:
    """Where it applies is read from the structure: of every corpus kernel and held-out naive
    start, only the one-program-per-output products are sites (the corpus experts none, so
    a forward probe adds it to the family's naive kernel, docs/SKILLS.md)."""
    files = sorted(SRC.glob("kernels/*/*.py")) + sorted(SRC.glob("heldout/*/naive.py"))
    sites = {
        str(f.relative_to(SRC))
        for f in files
        if f.name not in ("__init__.py", "problem.py")
        and PASS.forward_sites(f.read_text(encoding="utf-8"))
    }
    assert "heldout/matmul_long_k_small_mn/naive.py" in sites
    assert sites <= {"heldout/matmul_long_k_small_mn/naive.py", "kernels/skinny_matmul/naive.py"}


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        # a load before the loop: its padded lanes would read past R
        ("    lanes = tl.arange(0, BK)\n", "    lanes = tl.arange(0, BK)\n    s = tl.load(y + r)\n",
         "a load before the K loop"),
        # a pointer walked along K (carried by the loop): not rewritten
        ("    x_row = x + r * sxm\n", "    x_row = x + r * sxm + tl.arange(0, BK)\n",
         "mixes an output index with the K block"),
        ("        wv = tl.load(w_at,", "        wv = tl.load(w_at + r,", "reads both output indices"),
        ("        acc = acc + wv.to(tl.float32) * xv\n", "        acc = acc + wv * wv\n",
         "not a product of the two loads"),
        ("        acc = acc + wv.to(tl.float32) * xv\n", "        acc = acc + wv.to(tl.float16) * xv\n",
         "a cast to anything but fp32"),
        ("        acc = acc + wv.to(tl.float32) * xv\n", "        acc = tl.maximum(acc, wv * xv)\n",
         "not `acc += X * Y`"),
        ("tl.sum(acc, axis=0) * 0.5", "tl.sum(acc, axis=0) * 0.5 + acc", "not read once"),
        ("tl.store(y + r * sym + c,", "tl.store(y + r * sym,", "does not read both output indices"),
        ("tl.sum(acc, axis=0)", "tl.max(acc, axis=0)", "not read once, as tl.sum"),
        ("    c = tl.program_id(1)\n", "    c = tl.program_id(1) + 0\n", "read inside an expression"),
        ("        ks = k + lanes\n", "        ks = k + lanes\n        tl.atomic_add(y, 1.0)\n",
         "in the K loop"),
        ("        inside = ks < K\n", "        inside = tl.cumsum(ks, 0) < K\n", "lane by lane"),
        ("BK=32,", "BK=8,", "under 16"),
        ("    acc = tl.zeros((BK,), dtype=tl.float32)\n", "    acc = tl.zeros((BK,), dtype=tl.float16)\n",
         "not fp32"),
        ("    outer_dot[(x.shape[0], w.shape[0])](", "    outer_dot[grid](", "not a literal"),
        ("    return y", "    outer_dot[(1, 1)](x, w, y, 1, 1, 1, 1, BK=32)\n    return y",
         "launched from 2 places"),
    ],
)  # fmt: skip
def test_what_it_cannot_prove_is_skipped_with_the_reason(old: str, new: str, reason: str) -> None:
    assert old in PRODUCT, old
    source = PRODUCT.replace(old, new)
    assert PASS.forward_sites(source) == []
    why = PASS.why_not(source)[0]  # (both launches' when there are two)
    assert reason in why, why


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("[(M * N,)]", "[(M * K,)]", "is not R * N"),
        ("    j = t % N\n", "    j = t % K\n", "split by two divisors"),
        ("    j = t % N\n", "    j = t % N\n    u = t + 1\n", "not split into exactly two"),
    ],
)
def test_a_one_d_grid_split_otherwise_is_no_site(old: str, new: str, reason: str) -> None:
    source = LONG_K.read_text(encoding="utf-8")
    assert old in source
    (why,) = PASS.why_not(source.replace(old, new))
    assert reason in why, why
