"""Suffix sums along each row of x (M, N), the 16-bit scan done by tensor cores (issue 16 probe).

A hand-written probe, not a klineage output: does a triangular matmul scan faster than
tl.cumsum where the reverse cumsum's kept kernels stay at a third of the H200's floor (short
and long 16-bit rows, instruction-bound: docs/benchmarks.md)? The suffix sum of a chunk v of C
columns is v @ U with U[k, j] = 1 where k >= j: products by 0 and 1 are exact and tl.dot adds in
fp32, the same precision tl.cumsum's fp32 scan has (a different order of additions).
- Short rows: a [ROWS, C] tile a step, walked from the row's end, its total carried on.
- Long rows: a chunk of BM * BK contiguous elements is a [BM, BK] tile; v @ U scans each of its
  rows, the suffix of the later rows' totals (a BM-long tl.cumsum) is added, then the carried
  total. Rows split into segments over a second grid axis as split_scan does (a first kernel
  writes each segment's total), so 384 rows fill the card.
fp32 inputs take the plain tl.cumsum kernels (tl.dot would round them to tf32).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"ROWS": r, "C": c}, num_warps=w)
        for r, c, w in [
            (16, 32, 4),
            (32, 32, 4),
            (64, 32, 4),
            (128, 32, 8),
            (16, 64, 4),
            (32, 64, 4),
            (64, 64, 4),
            (64, 64, 8),
            (128, 64, 8),
            (32, 128, 4),
            (64, 128, 8),
            (16, 16, 4),
        ]
    ],
    key=["n", "n_rows"],
)
@triton.jit
def scan_rows_dot(x_ptr, y_ptr, n, pitch, n_rows, ROWS: tl.constexpr, C: tl.constexpr):
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS))[:, None]
    row_ok = rows < n_rows
    src = x_ptr + rows.to(tl.int64) * pitch
    dst = y_ptr + rows.to(tl.int64) * pitch
    k = tl.arange(0, C)
    upper = (k[:, None] >= k[None, :]).to(x_ptr.dtype.element_ty)
    carried = tl.zeros((ROWS, 1), tl.float32)
    for done in range(0, n, C):
        pos = (n - done - C) + k[None, :]
        ok = (pos >= 0) & row_ok
        v = tl.load(src + pos, mask=ok, other=0.0)
        out = tl.dot(v, upper) + carried
        tl.store(dst + pos, out.to(y_ptr.dtype.element_ty), mask=ok)
        carried += tl.sum(v.to(tl.float32), axis=1, keep_dims=True)


@triton.jit
def segment_totals(x_ptr, totals, n, pitch, n_seg, seg_len, STEP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    seg = tl.program_id(1)
    acc = tl.zeros((STEP,), tl.float32)
    for start in range(seg * seg_len, tl.minimum(seg * seg_len + seg_len, n), STEP):
        pos = start + tl.arange(0, STEP)
        acc += tl.load(x_ptr + row * pitch + pos, mask=pos < n, other=0.0).to(tl.float32)
    tl.store(totals + row * n_seg + seg, tl.sum(acc, axis=0))


@triton.autotune(
    configs=[
        triton.Config({"BM": bm, "BK": bk}, num_warps=w)
        for bm, bk, w in [
            (64, 64, 4),
            (64, 64, 8),
            (32, 64, 4),
            (128, 64, 8),
            (64, 32, 4),
            (128, 32, 8),
            (32, 128, 4),
            (64, 128, 8),
        ]
    ],
    key=["n", "seg_len"],
)
@triton.jit
def scan_long_dot(
    x_ptr,
    y_ptr,
    totals,
    n,
    pitch,
    n_seg,
    seg_len,
    SEG_P2: tl.constexpr,
    BM: tl.constexpr,
    BK: tl.constexpr,
    DOT: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    seg = tl.program_id(1)
    later = tl.arange(0, SEG_P2)
    carried = tl.sum(
        tl.load(totals + row * n_seg + later, mask=(later > seg) & (later < n_seg), other=0.0),
        axis=0,
    )
    k = tl.arange(0, BK)
    upper = (k[:, None] >= k[None, :]).to(x_ptr.dtype.element_ty)
    tile = tl.arange(0, BM)[:, None] * BK + k[None, :]
    lo = seg * seg_len
    hi = tl.minimum(lo + seg_len, n)
    # the segment's chunks from its last to its first (a chunk may run past hi: masked)
    for i in range(0, tl.cdiv(hi - lo, BM * BK)):
        start = lo + (tl.cdiv(hi - lo, BM * BK) - 1 - i) * (BM * BK)
        pos = start + tile
        ok = pos < hi
        v = tl.load(x_ptr + row * pitch + pos, mask=ok, other=0.0)
        if DOT:  # noqa: SIM108 (a compile-time branch, as the probe ran)
            within = tl.dot(v, upper)
        else:
            within = tl.cumsum(v.to(tl.float32), axis=1, reverse=True)
        t = tl.sum(v.to(tl.float32), axis=1)
        after = tl.cumsum(t, axis=0, reverse=True) - t
        out = within + after[:, None] + carried
        tl.store(y_ptr + row * pitch + pos, out.to(y_ptr.dtype.element_ty), mask=ok)
        carried += tl.sum(t, axis=0)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, n = x.shape
        y = torch.empty_like(x)
        dot = x.dtype in (torch.float16, torch.bfloat16)
        if dot and n <= 4096:
            grid = lambda meta: (triton.cdiv(rows, meta["ROWS"]),)  # noqa: E731
            scan_rows_dot[grid](x, y, n, x.stride(0), rows)
            return y
        # segments of whole 16384-element steps, about 8 programs an SM of 132, at most 64 a row
        step = 16384
        seg = max(1, min(triton.cdiv(8 * 132, max(1, rows)), triton.cdiv(n, step), 64))
        seg_len = step * triton.cdiv(triton.cdiv(n, step), seg)
        seg = triton.cdiv(n, seg_len)
        totals = torch.zeros((rows, seg), dtype=torch.float32, device=x.device)
        if seg > 1:
            segment_totals[(rows, seg)](x, totals, n, x.stride(0), seg, seg_len, STEP=1024)
        scan_long_dot[(rows, seg)](
            x, y, totals, n, x.stride(0), seg, seg_len, SEG_P2=triton.next_power_of_2(seg), DOT=dot
        )
        return y
