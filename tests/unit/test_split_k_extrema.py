"""split_k on running maxima and minima and on while loops (rewrite/passes/split_k.py,
split_k_reduction.py): source rewrites only, no kernels run. Golden rewrites of a column max
(a [BR] tile accumulator started from -float("inf"), `tl.maximum(e, best)`, stored as its
tl.max cast) and a column min in while form (a scalar from float("inf"), `r0 = 0` ...
`r0 += BR`), both written for these tests; the held-out column max, alone and column-tiled; the
skips a max, min or while kernel gets when the split is not proven, with their reasons."""

from __future__ import annotations

import ast

import pytest

from klineage.rewrite import all_passes
from klineage.rewrite.passes.split_k import SplitK
from tests.conftest import ROOT

SRC = ROOT / "src" / "klineage"
PASS = SplitK()

HEAD = """
import torch
import triton
import triton.language as tl


"""

COLUMN_MAX = (
    HEAD
    + """@triton.jit
def column_top(x, top, n_rows, stride, BR: tl.constexpr):
    'top[c] = max_r x[r, c], one program per column c'
    c = tl.program_id(0)
    best = tl.full([BR], -float("inf"), tl.float32)
    for r0 in range(0, n_rows, BR):
        rows = r0 + tl.arange(0, BR)
        x_r = tl.load(x + rows * stride + c, mask=rows < n_rows, other=float("-inf"))
        best = tl.maximum(x_r.to(tl.float32), best)
    tl.store(top + c, tl.max(best, axis=0).to(top.dtype.element_ty))


def column_max(x):
    top = torch.empty(x.shape[1], device=x.device, dtype=x.dtype)
    column_top[(x.shape[1],)](x, top, x.shape[0], x.stride(0), BR=64)
    return top
"""
)

COLUMN_MIN = (
    HEAD
    + """@triton.jit
def column_low(x, low, n_rows, stride, BR: tl.constexpr):
    'low[c] = min_r x[r, c], one program per column c, a while loop down its rows'
    c = tl.program_id(0).to(tl.int64)
    lo = float("inf")
    r0 = 0
    while r0 < n_rows:
        rows = r0 + tl.arange(0, BR)
        x_r = tl.load(x + rows * stride + c, mask=rows < n_rows, other=float("inf"))
        lo = tl.minimum(lo, tl.min(x_r, axis=0))
        r0 += BR
    tl.store(low + c, lo)


def column_min(x):
    low = torch.empty(x.shape[1], device=x.device, dtype=torch.float32)
    column_low[(x.shape[1],)](x, low, x.shape[0], x.stride(0), BR=32)
    return low
"""
)


def _combine(name: str, word: str, inf: str, shown: str, op: str) -> str:
    red = op[:3]
    return f'''

@triton.jit
def {name}(parts_ptr, out_ptr, n_out, n_split, BLOCK: tl.constexpr, PARTS: tl.constexpr):
    """out[i] = the {word} over s of parts[s, i] in fp32, cast to out's dtype (split_k's second
    kernel: the SPLIT partials of each output, an empty chunk's {shown} changing nothing)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n_out
    rows = tl.arange(0, PARTS)[:, None]
    best = tl.full((BLOCK,), float("{inf}"), tl.float32)
    for s0 in range(0, n_split, PARTS):
        s = s0 + rows
        at = parts_ptr + s.to(tl.int64) * n_out + offs[None, :]
        part = tl.load(at, mask=(s < n_split) & ok[None, :], other=float("{inf}"))
        best = tl.{op}(best, tl.{red}(part, axis=0), propagate_nan=tl.PropagateNan.ALL)
        best = tl.where(tl.max((part != part).to(tl.int32), axis=0) > 0, float("nan"), best)
    tl.store(out_ptr + offs, best.to(out_ptr.dtype.element_ty), mask=ok)
'''


COLUMN_MAX_AFTER = (
    HEAD
    + """@triton.jit
def column_top(x, top, n_rows, stride, BR: tl.constexpr, n_out):
    'top[c] = max_r x[r, c], one program per column c'
    # split_k: program (i, s) reduces chunk s of n_rows (a multiple of BR) into row s of the
    # fp32 partials at top, which a second kernel takes the maximum of
    split = tl.program_id(1)
    top += split.to(tl.int64) * n_out
    k_chunk = tl.cdiv(tl.cdiv(n_rows, tl.num_programs(1)), BR) * BR
    k_lo = split * k_chunk
    c = tl.program_id(0)
    best = tl.full([BR], -float("inf"), tl.float32)
    for r0 in range(k_lo, tl.minimum(k_lo + k_chunk, n_rows), BR):
        rows = r0 + tl.arange(0, BR)
        x_r = tl.load(x + rows * stride + c, mask=rows < n_rows, other=float("-inf"))
        best = tl.maximum(x_r.to(tl.float32), best)
    tl.store(top + c, tl.max(best, axis=0))
"""
    + _combine("_split_k_max", "maximum", "-inf", "-inf", "maximum")
    + """

def column_max(x):
    top = torch.empty(x.shape[1], device=x.device, dtype=x.dtype)
    # split_k: SPLIT programs per output, each reducing a chunk of x.shape[0] in fp32 into
    # top_parts[s]; _split_k_max takes the maximum of the SPLIT partials and casts to top's
    # dtype. SPLIT: programs for about 4x the 132 SMs of an H200, at most 512 chunks, at
    # least one step each.
    SPLIT = max(1, min(512, triton.cdiv(4 * 132, x.shape[1]), triton.cdiv(x.shape[0], 64)))
    top_parts = torch.empty((SPLIT, top.numel()), device=top.device, dtype=torch.float32)
    column_top[(x.shape[1], SPLIT)](x, top_parts, x.shape[0], x.stride(0), BR=64, n_out=top.numel())
    _split_k_max[(triton.cdiv(top.numel(), 256),)](top_parts, top, top.numel(), SPLIT, BLOCK=256, PARTS=min(16, triton.next_power_of_2(SPLIT)))
    return top
"""
)

COLUMN_MIN_AFTER = (
    HEAD
    + """@triton.jit
def column_low(x, low, n_rows, stride, BR: tl.constexpr, n_out):
    'low[c] = min_r x[r, c], one program per column c, a while loop down its rows'
    # split_k: program (i, s) reduces chunk s of n_rows (a multiple of BR) into row s of the
    # fp32 partials at low, which a second kernel takes the minimum of
    split = tl.program_id(1)
    low += split.to(tl.int64) * n_out
    k_chunk = tl.cdiv(tl.cdiv(n_rows, tl.num_programs(1)), BR) * BR
    k_lo = split * k_chunk
    c = tl.program_id(0).to(tl.int64)
    lo = float("inf")
    r0 = k_lo
    while r0 < tl.minimum(k_lo + k_chunk, n_rows):
        rows = r0 + tl.arange(0, BR)
        x_r = tl.load(x + rows * stride + c, mask=rows < n_rows, other=float("inf"))
        lo = tl.minimum(lo, tl.min(x_r, axis=0))
        r0 += BR
    tl.store(low + c, lo)
"""
    + _combine("_split_k_min", "minimum", "inf", "+inf", "minimum")
    + """

def column_min(x):
    low = torch.empty(x.shape[1], device=x.device, dtype=torch.float32)
    # split_k: SPLIT programs per output, each reducing a chunk of x.shape[0] in fp32 into
    # low_parts[s]; _split_k_min takes the minimum of the SPLIT partials and casts to low's
    # dtype. SPLIT given.
    SPLIT = 3
    low_parts = torch.empty((SPLIT, low.numel()), device=low.device, dtype=torch.float32)
    column_low[(x.shape[1], SPLIT)](x, low_parts, x.shape[0], x.stride(0), BR=32, n_out=low.numel())
    _split_k_min[(triton.cdiv(low.numel(), 256),)](low_parts, low, low.numel(), SPLIT, BLOCK=256, PARTS=min(16, triton.next_power_of_2(SPLIT)))
    return low
"""
)


def rewritten(source: str, name: str = "split_k", **params: object) -> str:
    p = all_passes()[name]
    (site,) = p.forward_sites(source)
    r = p.apply(source, site, dict(params))
    assert r.applied, r.reason
    assert r.source is not None and r.source != source
    ast.parse(r.source)
    return r.source


def test_golden_column_max_with_a_tile_accumulator_at_the_default_split() -> None:
    assert COLUMN_MAX_AFTER != COLUMN_MAX
    out = rewritten(COLUMN_MAX)
    assert out == COLUMN_MAX_AFTER
    assert "_split_k_sum" not in out  # only the combine kernel the reduction needs


def test_golden_column_min_in_while_form_at_a_fixed_split() -> None:
    assert COLUMN_MIN_AFTER != COLUMN_MIN
    assert rewritten(COLUMN_MIN, split=3) == COLUMN_MIN_AFTER


def test_a_sum_in_while_form_is_split_like_its_for_form() -> None:
    total = (
        COLUMN_MIN.replace('lo = float("inf")', "lo = 0.0")
        .replace("lo = tl.minimum(lo, tl.min(x_r, axis=0))", "lo += tl.sum(x_r, axis=0)")
        .replace('other=float("inf")', "other=0.0")
    )
    out = rewritten(total, split=3)
    for line in [
        "    r0 = k_lo\n",
        "    while r0 < tl.minimum(k_lo + k_chunk, n_rows):\n",
        "        lo += tl.sum(x_r, axis=0)\n        r0 += BR\n",
        "def _split_k_sum(parts_ptr, out_ptr, n_out, n_split, BLOCK: tl.constexpr, PARTS: tl.constexpr):\n",
    ]:
        assert line in out
    assert "_split_k_min" not in out


def test_the_held_out_column_max_alone_and_column_tiled_is_a_site() -> None:
    naive = (SRC / "heldout" / "column_max_bf16" / "naive.py").read_text(encoding="utf-8")
    alone = rewritten(naive)
    assert '    best = float("-inf")\n    i = k_lo\n' in alone
    assert "    tl.store(res + j, best)\n" in alone
    assert "triton.cdiv(4 * 132, width), triton.cdiv(height, 32)))" in alone
    tiled = rewritten(rewritten(naive, "column_tiling"))
    for line in [
        "    while i < tl.minimum(k_lo + k_chunk, height):\n",
        "        best = tl.maximum(best, tl.max(v.to(tl.float32), axis=0, keep_dims=True))\n",
        "    tl.store(res + j, best, mask=col_ok)\n",
        "colmax_walk[(triton.cdiv(width, BLOCK_N), SPLIT)](",
        "_split_k_max[(triton.cdiv(res.numel(), 256),)](res_parts, res, res.numel(), SPLIT, "
        "BLOCK=256, PARTS=min(16, triton.next_power_of_2(SPLIT)))",
    ]:
        assert line in tiled
    assert PASS.forward_sites(tiled) == []  # split once: its grid is 2-D now


def _skip_reason(source: str) -> str:
    assert PASS.forward_sites(source) == []
    return PASS.why_not(source)[0]


MAX_START = '    best = tl.full([BR], -float("inf"), tl.float32)\n'
MAX_UPDATE = "        best = tl.maximum(x_r.to(tl.float32), best)\n"
MAX_STORE = "    tl.store(top + c, tl.max(best, axis=0).to(top.dtype.element_ty))\n"


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        # a scaled maximum: max(2a, 2b) = 2 max(a, b) only for a factor >= 0, not read here
        (MAX_STORE, "    tl.store(top + c, tl.max(best, axis=0) * 2)\n", "is not the running maximum itself"),
        (MAX_STORE, "    tl.store(top + c, tl.max(best, axis=0) + 1.0)\n", "is not the running maximum itself"),
        (MAX_STORE, "    tl.store(top + c, tl.min(best, axis=0))\n", "is not the running maximum itself"),
        (MAX_STORE, "    tl.store(top + c, tl.sum(best, axis=0))\n", "is not the running maximum itself"),
        # the running maximum also read elsewhere: each chunk would see its own, not the whole's
        (MAX_UPDATE, "        x_r = x_r - tl.max(best, axis=0)\n" + MAX_UPDATE, "the accumulator best is read inside the K loop"),
        (MAX_START, "    best = tl.zeros([BR], dtype=tl.float32)\n", "only one fp32 -inf start"),
        (MAX_START, '    best = tl.full([BR], float("inf"), tl.float32)\n', "only one fp32 -inf start"),
        (MAX_START, '    best = tl.full([BR], float("-inf"), tl.float16)\n', "only one fp32 -inf start"),
        (MAX_UPDATE, "        best = tl.maximum(best, x_r, propagate_nan=tl.PropagateNan.ALL)\n",
         "does more to best than take its maximum"),
        (MAX_UPDATE, MAX_UPDATE + "        best += 1.0\n", "does more to best than take its maximum"),
        (MAX_UPDATE, "        best = tl.maximum(best, best * x_r)\n", "does more to best than take its maximum"),
        (MAX_UPDATE, "        best = tl.minimum(x_r, best)\n", "only one fp32 +inf start"),
    ],
)  # fmt: skip
def test_what_it_cannot_prove_of_a_maximum_is_skipped_with_the_reason(
    old: str, new: str, reason: str
) -> None:
    assert old in COLUMN_MAX
    assert reason in _skip_reason(COLUMN_MAX.replace(old, new))


LOAD = '        x_r = tl.load(x + rows * stride + c, mask=rows < n_rows, other=float("inf"))\n'
UPDATE = "        lo = tl.minimum(lo, tl.min(x_r, axis=0))\n"
BUMP = "        r0 += BR\n"


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        # stepped first: the loop's first step reads rows BR.. instead of 0..
        (LOAD + UPDATE + BUMP, BUMP + LOAD + UPDATE, "is not `while v < K`"),
        (BUMP, "", "is not `while v < K`"),
        (BUMP, "        r0 += n_rows\n", "is not `while v < K`"),  # a step no constexpr
        ("    while r0 < n_rows:\n", "    while r0 <= n_rows:\n", "is not `while v < K`"),
        ("    r0 = 0\n", "    r0 = BR\n", "is not `while v < K`"),
        ("    r0 = 0\n", "    r0 = 0\n    first = r0 + 1\n", "r0 is read before the loop"),
        (LOAD, LOAD + "        r0 = r0 + 0\n", "r0 is assigned besides its start and step"),
        ("    tl.store(low + c, lo)\n", "    tl.store(low + c + r0 * 0, lo)\n", "`r0` from the K loop is read after it"),
        ('    lo = float("inf")\n', '    lo = -float("inf")\n', "only one fp32 +inf start"),
    ],
)  # fmt: skip
def test_what_it_cannot_prove_of_a_while_loop_is_skipped_with_the_reason(
    old: str, new: str, reason: str
) -> None:
    assert old in COLUMN_MIN
    assert reason in _skip_reason(COLUMN_MIN.replace(old, new))
