"""Row-wise cumsum over the last dimension of x (M, N): expert version.

Three shapes, picked by the launcher from N and M:

  * next_power_of_2(N) <= MAX_FUSED_N (8192): `_cumsum_tile_kernel`. The row is one tile in
    registers, scanned once (tl.cumsum in fp32): x read once, y written once. Short rows are
    packed BLOCK_M to a program as a [BLOCK_M, BLOCK_N] tile scanned along axis 1.
  * longer rows: `_cumsum_looped_kernel`. One program per row walks it in tiles of
    LOOP_BLOCK_N: each tile is scanned in registers and the fp32 sum of every earlier tile
    (the carried prefix) is added to it, so the row never has to fit in registers.
  * long rows and fewer rows than MIN_ROWS_PER_SM per SM: each row is split into chunks of
    whole tiles over programs. `_cumsum_chunk_sums_kernel` writes each chunk's fp32 sum; the
    looped kernel then starts each chunk from the sum of the chunks before it (read from that
    small table, in a fixed order: deterministic, no atomics or waiting on other programs).
    x is read twice (1.5x the floor's bytes), which pays when the alternative leaves most
    SMs idle.

A 16-bit one-tile row scan is a product by a triangle of ones (Optimization 8: `_scan_by_dot`
and its helpers, the code klineage's scan_dot pass writes, so the walk removes it as one step).

Floor (H200, read once + write once at ~4.25 TB/s): 8192 x 8192 bf16 = 268 MB, ~63 us.
Not yet measured there: benchmarks/corpus.py --workloads cumsum.
"""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

# Optimization 1 (limit): rows up to 8192 columns are scanned as one tile in registers: 8192
# values over 8 warps are 32 fp32 a thread plus the scan's temporaries (no spills); the
# looped kernel's carry costs one more reduction per tile and a serial dependence between
# tiles, so it is kept for rows that do not fit.
MAX_FUSED_N = 8192
# Optimization 2 (size): elements of a short-row program's tile, BLOCK_M = ROW_TILE_ELEMENTS //
# BLOCK_N rows: 64 rows of 64 columns (8 KB of bf16) instead of 128 bytes a program.
ROW_TILE_ELEMENTS = 4096
# Optimization 3 (tile): columns per iteration of the looped kernel: 8 KB of bf16, 32 fp32
# values a thread at 4 warps. A guess to sweep with LOOP_NUM_STAGES on the H200.
LOOP_BLOCK_N = 4096
# Optimization 4: pipeline depth of the tile loops: the next tile's loads are in flight while
# this one is scanned and stored (the carry is a serial dependence, the loads are not).
LOOP_NUM_STAGES = 3
# Optimization 5 (split): rows are split when there are fewer than this many rows per SM; the
# split aims at PROGRAMS_PER_SM programs a SM, in chunks of at least MIN_CHUNK_COLS columns
# (4 tiles), so the chunk-sum table stays tiny and each program still loops.
MIN_ROWS_PER_SM = 2
PROGRAMS_PER_SM = 8
MIN_CHUNK_COLS = 16384
# Optimization 6: fp32 values per thread that set num_warps (4..16 warps).
ELEMENTS_PER_THREAD = 32
# Optimization 7 (hint): x is read once by the one-pass kernels; evict_first keeps it from
# pushing y's lines (and other programs' rows) out of L2. In the split path pass 2 re-reads
# the chunks that pass 1 summed, so there pass 1 asks L2 to keep them (evict_last).
X_EVICTION_POLICY = "evict_first"


@functools.cache
def _num_sms(device_index):
    if device_index is None:
        # The CPU interpreter: one pseudo-SM, so a CPU regime of one long row takes the split.
        return 1
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _num_warps(block_elems):
    # Optimization 6: warps from the tile, ELEMENTS_PER_THREAD values a thread, 4..16.
    return min(max(block_elems // (32 * ELEMENTS_PER_THREAD), 4), 16)


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
            out = tl.reshape(
                _scan_tile_by_dot(tl.reshape(v, (1, v.shape[0])), REVERSE), (v.shape[0],)
            )
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
    else by blocks of 64 lanes where the tile holds 1024 elements or more (16 blocks, a product's
    smallest); tl.cumsum where neither fits (blocks of 16 lanes on a 4 x 64 tile ran 0.82x of
    tl.cumsum on an H100, 2026-12-07)."""
    if v.shape[0] >= 16 and (v.shape[1] >= 16 and v.shape[1] <= 128):
        k = tl.arange(0, v.shape[1])
        if REVERSE:
            ones = k[:, None] >= k[None, :]
        else:
            ones = k[:, None] <= k[None, :]
        out = tl.dot(v, ones.to(v.dtype))
    elif v.shape[1] >= 64 and v.shape[0] * v.shape[1] >= 1024:
        out = _scan_blocks_by_dot(v, 64, REVERSE)
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
    # Optimization 2: BLOCK_M rows per program. With N = 64 a row is 128 bytes; 64 rows make an
    # 8 KB tile per program and 16384 programs instead of 1048576.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    # int64 row offsets: M * N passes 2^31 at 1048576 x 4096.
    rows64 = rows.to(tl.int64)
    x = tl.load(
        X + rows64[:, None] * stride_x + cols[None, :],
        mask=mask,
        other=0.0,
        eviction_policy=X_EVICTION,
    )
    # Optimization 1: one scan in registers, fp32 whatever the input (a bf16 running sum keeps
    # 3 significant digits), rounded once on the store.
    # Optimization 8 (compute): a 16-bit tile's scan as one product by a triangle of ones on the
    # tensor cores (exact products, fp32 sums; _scan_by_dot, as klineage's scan_dot writes it):
    # tl.cumsum's shuffles bound a short-row scan, and 64 rows of 64 columns is the product's
    # tile (on an H100, 2026-12-07, a [64, 64]-tile suffix scan ran 1.81x the 4-row tl.cumsum
    # kernel on 524288 x 160 fp16). fp32 tiles take tl.cumsum (a product would round to tf32).
    y = _scan_by_dot(x, 1, False)
    tl.store(Y + rows64[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _cumsum_chunk_sums_kernel(
    X,
    S,
    n_cols,
    stride_x,
    chunk_cols,
    n_chunks,
    BLOCK_N: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    # Optimization 5, pass 1: program (row, chunk) writes the fp32 sum of its chunk to S.
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    start = chunk * chunk_cols
    end = tl.minimum(start + chunk_cols, n_cols)
    cols = tl.arange(0, BLOCK_N)
    x_row = X + row * stride_x
    # An elementwise accumulator, reduced once after the loop.
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for c0 in tl.range(start, end, BLOCK_N, num_stages=NUM_STAGES):
        offs = c0 + cols
        # evict_last: pass 2 reads these bytes again.
        x = tl.load(x_row + offs, mask=offs < end, other=0.0, eviction_policy="evict_last")
        acc += x.to(tl.float32)
    tl.store(S + row * n_chunks + chunk, tl.sum(acc, axis=0))


@triton.jit
def _cumsum_looped_kernel(
    X,
    Y,
    S,
    n_cols,
    stride_x,
    stride_y,
    chunk_cols,
    n_chunks,
    BLOCK_N: tl.constexpr,
    BLOCK_C: tl.constexpr,
    HAS_PREFIX: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    X_EVICTION: tl.constexpr,
):
    # Optimization 3: program (row, chunk) scans columns [chunk * chunk_cols, +chunk_cols) of
    # its row in BLOCK_N tiles; with one chunk, the whole row.
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    start = chunk * chunk_cols
    end = tl.minimum(start + chunk_cols, n_cols)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    cols = tl.arange(0, BLOCK_N)
    if HAS_PREFIX:
        # Optimization 5, pass 2: the chunk starts from the sum of the chunks before it, in
        # chunk order (the table has one fp32 per chunk: 8 for a 131072-column row).
        c = tl.arange(0, BLOCK_C)
        earlier = tl.load(S + row * n_chunks + c, mask=c < chunk, other=0.0)
        carry = tl.sum(earlier, axis=0)
    else:
        carry = 0.0
    # Optimization 4: software pipelining of the tile loop.
    for c0 in tl.range(start, end, BLOCK_N, num_stages=NUM_STAGES):
        offs = c0 + cols
        mask = offs < end
        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy=X_EVICTION)
        x = x.to(tl.float32)
        # The carried prefix: the tile's own scan plus the fp32 sum of every earlier tile.
        y = tl.cumsum(x, axis=0) + carry
        tl.store(y_row + offs, y.to(Y.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


def cumsum_forward(x):
    n_cols = x.shape[-1]
    x2 = x.contiguous().view(-1, n_cols)
    n_rows = x2.shape[0]
    y2 = torch.empty_like(x2)
    BLOCK_N = triton.next_power_of_2(n_cols)

    if BLOCK_N <= MAX_FUSED_N:
        # Optimizations 1 and 2: the row is one tile; pack short rows BLOCK_M to a program.
        BLOCK_M = min(max(ROW_TILE_ELEMENTS // BLOCK_N, 1), triton.next_power_of_2(n_rows))
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
            num_warps=_num_warps(BLOCK_M * BLOCK_N),
        )
    else:
        # Optimization 3: tiles with a carried prefix. Optimization 5: split rows into chunks
        # of whole tiles when there are too few rows to give every SM MIN_ROWS_PER_SM.
        n_chunks = 1
        device_index = x2.device.index if x2.is_cuda else None
        if x2.is_cuda and device_index is None:
            device_index = torch.cuda.current_device()
        num_sms = _num_sms(device_index)
        if n_rows < num_sms * MIN_ROWS_PER_SM:
            n_chunks = max(
                1,
                min(
                    triton.cdiv(num_sms * PROGRAMS_PER_SM, n_rows),
                    triton.cdiv(n_cols, MIN_CHUNK_COLS),
                ),
            )
        chunk_cols = triton.cdiv(triton.cdiv(n_cols, n_chunks), LOOP_BLOCK_N) * LOOP_BLOCK_N
        n_chunks = triton.cdiv(n_cols, chunk_cols)
        # Unused (HAS_PREFIX is False) unless the rows are split.
        sums = y2
        if n_chunks > 1:
            sums = torch.empty((n_rows, n_chunks), dtype=torch.float32, device=x2.device)
            _cumsum_chunk_sums_kernel[(n_rows, n_chunks)](
                x2,
                sums,
                n_cols,
                x2.stride(0),
                chunk_cols,
                n_chunks,
                BLOCK_N=LOOP_BLOCK_N,
                NUM_STAGES=LOOP_NUM_STAGES,
                num_warps=_num_warps(LOOP_BLOCK_N),
            )
        _cumsum_looped_kernel[(n_rows, n_chunks)](
            x2,
            y2,
            sums,
            n_cols,
            x2.stride(0),
            y2.stride(0),
            chunk_cols,
            n_chunks,
            BLOCK_N=LOOP_BLOCK_N,
            BLOCK_C=triton.next_power_of_2(n_chunks),
            HAS_PREFIX=n_chunks > 1,
            NUM_STAGES=LOOP_NUM_STAGES,
            X_EVICTION=X_EVICTION_POLICY,
            num_warps=_num_warps(LOOP_BLOCK_N),
        )
    return y2.view(x.shape)


class ModelNew(nn.Module):
    def forward(self, x):
        return cumsum_forward(x)
