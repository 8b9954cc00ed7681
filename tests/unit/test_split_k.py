"""The split_k pass (rewrite/passes/split_k.py): source rewrites only, no kernels run. Golden
rewrites of the held-out long-K matmul naive and of a GEMV written for these tests (one program
per output row, a scalar accumulator grown by `acc = acc + ...`, a scaled and cast store, one
argument a line); the skips a kernel gets when the split is not proven, with their reasons."""

from __future__ import annotations

import ast

import pytest

from klineage.rewrite import all_passes
from klineage.rewrite.passes.split_k import SplitK
from tests.conftest import ROOT

SRC = ROOT / "src" / "klineage"
PASS = SplitK()

GEMV = """
import torch
import triton
import triton.language as tl


@triton.jit
def row_dot(
    w,
    x,
    y,
    K,
    ldw,
    BK: tl.constexpr,
):
    'y[r] = 2 * sum_k w[r, k] * x[k], one program per row r'
    r = tl.program_id(0).to(tl.int64)
    acc = 0.0
    for k in range(0, K, BK):
        cols = k + tl.arange(0, BK)
        m = cols < K
        wv = tl.load(w + r * ldw + cols, mask=m, other=0.0).to(tl.float32)
        acc = acc + tl.sum(wv * tl.load(x + cols, mask=m, other=0.0), axis=0)
    twice = acc * 2
    tl.store(y + r, twice.to(tl.float16))


def gemv(w, x):
    y = torch.empty(w.shape[0], device=w.device, dtype=torch.float16)
    row_dot[(w.shape[0],)](
        w,
        x,
        y,
        w.shape[1],
        w.stride(0),
        BK=256,
    )
    return y
"""

SUM_KERNEL = '''

@triton.jit
def _split_k_sum(parts_ptr, out_ptr, n_out, n_split, BLOCK: tl.constexpr, PARTS: tl.constexpr):
    """out[i] = the sum over s of parts[s, i] in fp32, cast to out's dtype (split_k's second
    kernel: the SPLIT partials of each output, PARTS rows a step, in a fixed order)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n_out
    rows = tl.arange(0, PARTS)[:, None]
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for s0 in range(0, n_split, PARTS):
        s = s0 + rows
        at = parts_ptr + s.to(tl.int64) * n_out + offs[None, :]
        total += tl.sum(tl.load(at, mask=(s < n_split) & ok[None, :], other=0.0), axis=0)
    tl.store(out_ptr + offs, total.to(out_ptr.dtype.element_ty), mask=ok)
'''

GEMV_AFTER = (
    """
import torch
import triton
import triton.language as tl


@triton.jit
def row_dot(
    w,
    x,
    y,
    K,
    ldw,
    BK: tl.constexpr,
    n_out,
):
    'y[r] = 2 * sum_k w[r, k] * x[k], one program per row r'
    # split_k: program (i, s) reduces chunk s of K (a multiple of BK) into row s of the fp32
    # partials at y, which a second kernel adds up
    split = tl.program_id(1)
    y += split.to(tl.int64) * n_out
    k_chunk = tl.cdiv(tl.cdiv(K, tl.num_programs(1)), BK) * BK
    k_lo = split * k_chunk
    r = tl.program_id(0).to(tl.int64)
    acc = 0.0
    for k in range(k_lo, tl.minimum(k_lo + k_chunk, K), BK):
        cols = k + tl.arange(0, BK)
        m = cols < K
        wv = tl.load(w + r * ldw + cols, mask=m, other=0.0).to(tl.float32)
        acc = acc + tl.sum(wv * tl.load(x + cols, mask=m, other=0.0), axis=0)
    twice = acc * 2
    tl.store(y + r, twice)
"""
    + SUM_KERNEL
    + """

def gemv(w, x):
    y = torch.empty(w.shape[0], device=w.device, dtype=torch.float16)
    # split_k: SPLIT programs per output, each reducing a chunk of w.shape[1] in fp32 into
    # y_parts[s]; _split_k_sum adds the SPLIT partials in order and casts to y's dtype.
    # SPLIT given.
    SPLIT = 4
    y_parts = torch.empty((SPLIT, y.numel()), device=y.device, dtype=torch.float32)
    row_dot[(w.shape[0], SPLIT)](
        w,
        x,
        y_parts,
        w.shape[1],
        w.stride(0),
        BK=256,
        n_out=y.numel(),
    )
    _split_k_sum[(triton.cdiv(y.numel(), 256),)](y_parts, y, y.numel(), SPLIT, BLOCK=256, PARTS=min(16, triton.next_power_of_2(SPLIT)))
    return y
"""
)

# matmul_long_k_small_mn/naive.py from its kernel on, rewritten at the default SPLIT
LONG_K_AFTER = (
    """@triton.jit
def dot_per_output(a_ptr, b_ptr, c_ptr, N, K, sa_m, sa_k, sb_k, sb_n, STEP: tl.constexpr, n_out):
    # split_k: program (i, s) reduces chunk s of K (a multiple of STEP) into row s of the
    # fp32 partials at c_ptr, which a second kernel adds up
    split = tl.program_id(1)
    c_ptr += split.to(tl.int64) * n_out
    k_chunk = tl.cdiv(tl.cdiv(K, tl.num_programs(1)), STEP) * STEP
    k_lo = split * k_chunk
    t = tl.program_id(0)
    i = t // N
    j = t % N
    part = tl.zeros([STEP], dtype=tl.float32)
    for k0 in range(k_lo, tl.minimum(k_lo + k_chunk, K), STEP):
        kk = (k0 + tl.arange(0, STEP)).to(tl.int64)
        ok = kk < K
        a = tl.load(a_ptr + i * sa_m + kk * sa_k, mask=ok, other=0.0)
        b = tl.load(b_ptr + kk * sb_k + j * sb_n, mask=ok, other=0.0)
        part += a.to(tl.float32) * b.to(tl.float32)
    tl.store(c_ptr + i * N + j, tl.sum(part, axis=0))
"""
    + SUM_KERNEL
    + """

class ModelNew(nn.Module):
    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), dtype=A.dtype, device=A.device)
        # split_k: SPLIT programs per output, each reducing a chunk of K in fp32 into
        # C_parts[s]; _split_k_sum adds the SPLIT partials in order and casts to C's dtype.
        # SPLIT: programs for about 4x the 132 SMs of an H200, at most 512 chunks, at least one
        # step each.
        SPLIT = max(1, min(512, triton.cdiv(4 * 132, M * N), triton.cdiv(K, 64)))
        C_parts = torch.empty((SPLIT, C.numel()), device=C.device, dtype=torch.float32)
        dot_per_output[(M * N, SPLIT)](
            A, B, C_parts, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), STEP=64, n_out=C.numel()
        )
        _split_k_sum[(triton.cdiv(C.numel(), 256),)](C_parts, C, C.numel(), SPLIT, BLOCK=256, PARTS=min(16, triton.next_power_of_2(SPLIT)))
        return C
"""
)


def rewritten(source: str, **params: object) -> str:
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site, dict(params))
    assert r.applied, r.reason
    assert r.source is not None and r.source != source
    ast.parse(r.source)
    return r.source


def test_golden_long_k_matmul_naive_at_the_default_split() -> None:
    source = (SRC / "heldout" / "matmul_long_k_small_mn" / "naive.py").read_text(encoding="utf-8")
    head = source[: source.index("@triton.jit")]
    assert head + LONG_K_AFTER != source
    assert rewritten(source) == head + LONG_K_AFTER


def test_golden_gemv_one_row_per_program_at_a_fixed_split() -> None:
    assert GEMV_AFTER != GEMV
    assert rewritten(GEMV, split=4) == GEMV_AFTER


def test_split_as_a_launcher_expression_or_a_target_program_count() -> None:
    out = rewritten(GEMV, split="max(1, min(64, triton.cdiv(w.shape[1], 4096)))")
    assert "    SPLIT = max(1, min(64, triton.cdiv(w.shape[1], 4096)))\n" in out
    out = rewritten(GEMV, programs=1056, max_split=16)
    assert (
        "SPLIT = max(1, min(16, triton.cdiv(1056, w.shape[0]), triton.cdiv(w.shape[1], 256)))"
        in out
    )
    (site,) = PASS.forward_sites(GEMV)
    assert "NOPE, not defined here" in PASS.apply(GEMV, site, {"split": "max(1, NOPE)"}).reason
    for bad in (0, 2.5, True, 65536, "max(1,"):
        r = PASS.apply(GEMV, site, {"split": bad})
        assert not r.applied and "params['split']" in r.reason, bad


def test_registered_and_forward_only() -> None:
    assert isinstance(all_passes()["split_k"], SplitK)
    assert PASS.backward_sites(GEMV_AFTER) == []
    # the rewritten kernel's grid is 2-D, and the sum kernel's loop carries a pointer
    assert PASS.forward_sites(GEMV_AFTER) == []
    assert PASS.why_not(GEMV_AFTER) == [
        "row_dot: grid `(w.shape[0], SPLIT)` is not a literal 1-D tuple (programs,)",
        "_split_k_sum: the combine of a split (split_k's own second kernel)",
    ]


@pytest.mark.parametrize(
    ("path", "lines"),
    [
        # one program per block of 64 rows, a (64, 128) tile a step
        ("heldout/gemv/naive.py", ["    for c in range(k_lo, tl.minimum(k_lo + k_chunk, K), K_TILE):",
                                   "    tl.store(y_ptr + row_ids, sums, mask=row_ok)",
                                   "_matvec_rows[(triton.cdiv(N, ROWS), SPLIT)](",
                                   "triton.cdiv(4 * 132, triton.cdiv(N, ROWS)), triton.cdiv(K, K_TILE)))"]),
        # tl.dot into the accumulator: a 64x64 block of C a program, K in steps of 32
        ("heldout/matmul_tall_skinny_fp32/naive.py", ["    for kb in range(k_lo, tl.minimum(k_lo + k_chunk, K), BLOCK_K):",
                                                      "    c_ptr += split.to(tl.int64) * n_out",
                                                      "        a, b, c_parts,",
                                                      "        c.stride(0), c.stride(1),"]),
        # a reduction over rows is split the same way (the mean is the scaled sum)
        ("heldout/column_mean_tall/naive.py", ["    tl.store(dst + c, total / n_rows)",
                                               "triton.cdiv(n_rows, 16)"]),
    ],
)  # fmt: skip
def test_the_long_loop_reductions_are_sites(path: str, lines: list[str]) -> None:
    out = rewritten((SRC / path).read_text(encoding="utf-8"))
    assert "tl.program_id(1)" in out and "_split_k_sum[(triton.cdiv(" in out
    for line in lines:
        assert line in out


def test_kernels_without_one_split_reduction_are_not_sites() -> None:
    for path in ["kernels/softmax/naive.py", "kernels/matmul/naive.py", "heldout/reverse_cumsum_rows/naive.py",
                 "heldout/matmul_bias_relu/naive.py", "kernels/cross_entropy/naive.py"]:  # fmt: skip
        assert PASS.forward_sites((SRC / path).read_text(encoding="utf-8")) == [], path


def _skip_reason(source: str) -> str:
    assert PASS.forward_sites(source) == []
    return PASS.why_not(source)[0]


HEAD = GEMV.split("    r = tl.program_id(0).to(tl.int64)")[0]
TAIL = GEMV.split("    tl.store(y + r, twice.to(tl.float16))\n")[1]
START = "    r = tl.program_id(0)\n    acc = 0.0\n"
LOOP = "    for k in range(0, K, BK):\n        cols = k + tl.arange(0, BK)\n"
ADD = "        acc += tl.sum(tl.load(w + r * ldw + cols), axis=0)\n"
STORE = "    tl.store(y + r, acc)\n"


def _kernel(body: str, old: str = "", new: str = "") -> str:
    return HEAD + body + TAIL.replace(old, new)


@pytest.mark.parametrize(
    ("body", "old", "new", "reason"),
    [
        (START + LOOP + ADD + "    " + STORE, "", "", "a store inside the K loop"),
        (START + LOOP + "        acc = acc * 0.5 + tl.sum(tl.load(w + r * ldw + cols), axis=0)\n" + STORE,
         "", "", "does more to acc than add to it"),
        (START + LOOP + "        t = acc + 1.0\n" + ADD + STORE, "", "", "acc is read inside the K loop"),
        # an advanced pointer is carried too: each chunk would need its own start
        (START + "    p = w + r * ldw\n    for k in range(0, K, BK):\n"
         "        acc += tl.sum(tl.load(p + tl.arange(0, BK)), axis=0)\n        p += BK\n" + STORE,
         "", "", "the K loop carries acc, p"),
        (START + "    m = 0.0\n" + LOOP + ADD + "        m = tl.maximum(m, tl.max(tl.load(w + cols), axis=0))\n"
         + STORE, "", "", "the K loop carries acc, m"),
        (START + "    for k in range(BK, K, BK):\n        acc += tl.sum(tl.load(w + k), axis=0)\n" + STORE,
         "", "", "is not range(0, K, STEP)"),
        (START + "    for k in range(0, K):\n        acc += tl.load(w + k)\n" + STORE, "", "", "is not range(0, K, STEP)"),
        (START + LOOP + ADD + "    tl.store(y + r, acc + 1.0)\n", "", "", "not the accumulator summed"),
        (START + LOOP + ADD + "    tl.store(y + r, tl.exp(acc))\n", "", "", "not the accumulator summed"),
        (START + LOOP + ADD + "    tl.store(y + r, (acc * acc).to(tl.float16))\n", "", "", "not the accumulator summed"),
        ("    r = tl.program_id(0)\n    acc = tl.full([BK], 1.0, tl.float32)\n" + LOOP
         + "        acc += tl.load(w + cols)\n    tl.store(y + r, tl.sum(acc, axis=0))\n", "", "", "fp32 zero start"),
        ("    r = tl.program_id(0)\n    acc = tl.zeros([BK], dtype=tl.int32)\n" + LOOP
         + "        acc += tl.load(w + cols)\n    tl.store(y + r, tl.sum(acc, axis=0))\n", "", "", "fp32 zero start"),
        (START + LOOP + ADD + "    tl.store(y + r, acc * cols)\n", "", "", "`cols` from the K loop is read after it"),
        (START + "    prev = tl.load(y + r)\n" + LOOP + ADD + STORE, "", "", "the output pointer y is used besides its store"),
        (START + LOOP + ADD + "    if K > 0:\n        tl.store(y + r, acc)\n", "", "", "a if statement"),
        (START + LOOP + ADD + "    tl.atomic_add(y + r, acc)\n", "", "", "atomics"),
        # a zeroed output: the sum kernel's overwriting all of it would change what was never stored
        (START + LOOP + ADD + STORE, "torch.empty(", "torch.zeros(", "allocates uninitialised"),
        (START + LOOP + ADD + STORE, "[(w.shape[0],)]", "[grid]", "not a literal 1-D tuple"),
        (START + LOOP + ADD + STORE, "    row_dot[", "    y.zero_()\n    row_dot[", "`y` is used before the launch"),
        (START + LOOP + ADD + STORE, "        w.shape[1],\n", "        k_of(w),\n", "may not be evaluated twice"),
        (START + LOOP + ADD + STORE, "    return y", "    row_dot[(1,)](w, x, y, 1, 1, BK=256)\n    return y",
         "launched from 2 places"),
    ],
)  # fmt: skip
def test_what_it_cannot_prove_is_skipped_with_the_reason(
    body: str, old: str, new: str, reason: str
) -> None:
    assert old in TAIL
    assert reason in _skip_reason(_kernel(body, old, new))
