"""Suffix sums along each row of x (M, N), a newcomer's version: one program per row.

The program walks its row from the end in chunks of 64 columns: it loads the chunk back to
front (positions n-1, n-2, ... of what is left), scans it forward with tl.cumsum in fp32, adds
the total of the chunks already done, stores the chunk at the same positions and carries its
sum on. Default launch settings; one short program per row when rows are short, and one long
serial walk per row when they are long and few.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scan_by_dot(v, AXIS: tl.constexpr, REVERSE: tl.constexpr):
    """scan_dot (klineage): tl.cumsum(v.to(tl.float32), AXIS, reverse=REVERSE), by tl.dot with
    a triangle of ones where v is an fp16 / bf16 row or tile scanned along its last axis and
    _scan_tile_by_dot takes it; tl.cumsum elsewhere (fp32 would round to tf32). Every test is one
    comparison of compile-time values: an older code generator (triton-lang/triton 0072ae0)
    applies `and` by a method a Python bool lacks, and compares a Python int to a constexpr
    one way only."""
    if v.dtype == tl.float16:
        out = _scan_16bit_by_dot(v, AXIS, REVERSE)
    elif v.dtype == tl.bfloat16:
        out = _scan_16bit_by_dot(v, AXIS, REVERSE)
    else:
        out = tl.cumsum(v.to(tl.float32), axis=AXIS, reverse=REVERSE)
    return out


@triton.jit
def _scan_16bit_by_dot(v, AXIS: tl.constexpr, REVERSE: tl.constexpr):
    """A 16-bit v: a 1-D chunk as a tile of one row, a 2-D tile along axis 1 as it is."""
    if AXIS == 0:
        if tl.constexpr(len(v.shape)) == 1:
            out = tl.reshape(_scan_tile_by_dot(tl.reshape(v, (1, v.shape[0])), REVERSE), (v.shape[0],))
        else:
            out = tl.cumsum(v.to(tl.float32), axis=AXIS, reverse=REVERSE)
    elif tl.constexpr(len(v.shape)) == 2:
        out = _scan_tile_by_dot(v, REVERSE)
    else:
        out = tl.cumsum(v.to(tl.float32), axis=AXIS, reverse=REVERSE)
    return out


@triton.jit
def _scan_tile_by_dot(v, REVERSE: tl.constexpr):
    """A 16-bit [R, C] tile's fp32 scan along axis 1: one product by a C x C triangle where
    R >= 16 (tl.dot's smallest) and 16 <= C <= 128 (a wider triangle outgrows shared memory),
    else by blocks of B lanes (64, or 16 for a tile under 1024 elements) where the blocks make
    16 rows or more; tl.cumsum where neither fits."""
    if v.shape[0] >= 16 and (v.shape[1] >= 16 and v.shape[1] <= 128):
        k = tl.arange(0, v.shape[1])
        if REVERSE:
            ones = k[:, None] >= k[None, :]
        else:
            ones = k[:, None] <= k[None, :]
        out = tl.dot(v, ones.to(v.dtype))
    elif v.shape[1] >= 64 and v.shape[0] * v.shape[1] >= 1024:
        out = _scan_blocks_by_dot(v, 64, REVERSE)
    elif v.shape[1] >= 16 and v.shape[0] * v.shape[1] >= 256:
        out = _scan_blocks_by_dot(v, 16, REVERSE)
    else:
        out = tl.cumsum(v.to(tl.float32), axis=1, reverse=REVERSE)
    return out


@triton.jit
def _scan_blocks_by_dot(v, B: tl.constexpr, REVERSE: tl.constexpr):
    """The tile's rows cut into blocks of B lanes, each block scanned by a product by a B x B
    triangle, then the exclusive scan of the blocks' totals along each row added to them (the
    two-level scan of chunked linear-attention kernels)."""
    k = tl.arange(0, B)
    if REVERSE:
        ones = k[:, None] >= k[None, :]
    else:
        ones = k[:, None] <= k[None, :]
    blocks = tl.reshape(v, (v.shape[0] * v.shape[1] // B, B))
    within = tl.reshape(tl.dot(blocks, ones.to(v.dtype)), (v.shape[0], v.shape[1] // B, B))
    totals = tl.sum(tl.reshape(v.to(tl.float32), (v.shape[0], v.shape[1] // B, B)), axis=2)
    others = tl.cumsum(totals, axis=1, reverse=REVERSE) - totals
    return tl.reshape(within + others[:, :, None], (v.shape[0], v.shape[1]))


@triton.jit
def suffix_scan_row(x_ptr, y_ptr, n, pitch, CHUNK: tl.constexpr, n_rows, ROWS: tl.constexpr):
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS))[:, None]
    row_ok = rows < n_rows
    row = rows.to(tl.int64)
    src = x_ptr + row * pitch
    dst = y_ptr + row * pitch
    carried = tl.full((ROWS, 1), 0.0, tl.float32)
    for done in range(0, n, CHUNK):
        pos = (n - done - CHUNK) + tl.arange(0, CHUNK)[None, :]
        inside = pos >= 0
        v_in2 = tl.load(src + pos, mask=inside & row_ok, other=0.0)
        v = v_in2.to(tl.float32)
        out = carried + _scan_by_dot(v_in2, 1, True)
        tl.store(dst + pos, out.to(y_ptr.dtype.element_ty), mask=inside & row_ok)
        carried += tl.sum(v, axis=1, keep_dims=True)


class _ModelNewBase(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, n = x.shape
        y = torch.empty_like(x)
        # multi_row: a [ROWS, BLOCK] tile of about 256 elements, at most 64 rows; short rows fill a program
        ROWS = min(16, triton.next_power_of_2(rows))
        suffix_scan_row[(triton.cdiv(rows, ROWS),)](x, y, n, x.stride(0), CHUNK=64, n_rows=rows, ROWS=ROWS)
        return y


@triton.jit
def suffix_scan_row_alt(x_ptr, y_ptr, n, pitch, CHUNK: tl.constexpr, totals, n_seg, seg_len, SEG_P2: tl.constexpr, HAS_PREFIX: tl.constexpr):
    # split_scan: program (i, s) runs segment s of the loop over n (seg_len elements, whole
    # steps of CHUNK), carried started from the fp32 totals of segments 0..s-1
    seg = tl.program_id(1)
    row = tl.program_id(0).to(tl.int64)
    src = x_ptr + row * pitch
    dst = y_ptr + row * pitch
    carried = 0.0
    # split_scan: the totals of the segments before this one, added in segment order
    if HAS_PREFIX:
        earlier = tl.arange(0, SEG_P2)
        at = totals + tl.program_id(0).to(tl.int64) * n_seg + earlier
        carried += tl.sum(tl.load(at, mask=earlier < seg, other=0.0), axis=0)
    for done in range(seg * seg_len, tl.minimum(seg * seg_len + seg_len, n), CHUNK):
        pos = (n - done - CHUNK) + tl.arange(0, CHUNK)
        inside = pos >= 0
        v_in = tl.load(src + pos, mask=inside, other=0.0)
        v = v_in.to(tl.float32)
        out = carried + _scan_by_dot(v_in, 0, True)
        tl.store(dst + pos, out.to(y_ptr.dtype.element_ty), mask=inside)
        carried += tl.sum(v, axis=0)


@triton.jit
def _split_scan_totals_suffix_scan_row_alt(x_ptr, y_ptr, n, pitch, CHUNK: tl.constexpr, totals, n_seg, seg_len):
    """split_scan's first kernel: totals[i, s] = the fp32 sum of what suffix_scan_row_alt's
    loop adds to carried over segment s of row i (program (i, s)), from the statements that
    value depends on."""
    seg = tl.program_id(1)
    row = tl.program_id(0).to(tl.int64)
    src = x_ptr + row * pitch
    carried = 0.0
    for done in range(seg * seg_len, tl.minimum(seg * seg_len + seg_len, n), CHUNK):
        pos = (n - done - CHUNK) + tl.arange(0, CHUNK)
        inside = pos >= 0
        v = tl.load(src + pos, mask=inside, other=0.0).to(tl.float32)
        carried += tl.sum(v, axis=0)
    tl.store(totals + tl.program_id(0).to(tl.int64) * n_seg + seg, carried)


class _ModelNewAlternative(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, n = x.shape
        y = torch.empty_like(x)
        # split_scan: each row's loop over n split into SEG segments of seg_len elements (whole
        # steps of SCAN_STEP) over a second grid axis; _split_scan_totals_suffix_scan_row_alt
        # writes each segment's fp32 total to seg_totals, from which a segment's scan starts
        # (none when SEG == 1). SEG: about 8 programs for each of the 132 SMs of an H200, at
        # least one step and at most 64 segments a row. SCAN_STEP: the step of both kernels, at
        # least 64 and up to 4096 elements (the row's next power of two if shorter).
        SCAN_STEP = max(64, min(4096, triton.next_power_of_2(n)))
        SEG = max(1, min(triton.cdiv(8 * 132, max(1, rows)), triton.cdiv(n, SCAN_STEP), 64))
        seg_len = SCAN_STEP * max(1, triton.cdiv(triton.cdiv(n, SCAN_STEP), SEG))
        SEG = max(1, triton.cdiv(n, seg_len))
        seg_totals = torch.empty((rows, SEG), dtype=torch.float32, device=y.device)
        if SEG > 1:
            _split_scan_totals_suffix_scan_row_alt[(rows, SEG)](x, y, n, x.stride(0), CHUNK=SCAN_STEP, totals=seg_totals, n_seg=SEG, seg_len=seg_len)
        suffix_scan_row_alt[(rows, SEG)](x, y, n, x.stride(0), CHUNK=SCAN_STEP, totals=seg_totals, n_seg=SEG, seg_len=seg_len, SEG_P2=triton.next_power_of_2(SEG), HAS_PREFIX=SEG > 1)
        return y


class ModelNew(_ModelNewBase):
    """Regime dispatch (klineage): the alternative where input 0's last dimension >= 48990;
    measured faster there (long_rows_bf16 1.11x), side by side with the other path.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        alternative = _ModelNewAlternative(*args, **kwargs)
        alternative.load_state_dict(self.state_dict())  # the same parameters on both paths
        self.alternative = alternative

    def forward(self, *inputs):
        tensors = [v for v in inputs if hasattr(v, "shape") and hasattr(v, "numel")]
        if tensors[0].shape[-1] >= 48990:
            return self.alternative(*inputs)
        return super().forward(*inputs)
