"""Column sums y[j] = sum_i x[i, j] of x (M, N): expert version.

One kernel reads x in 2-D tiles of BLOCK_M rows x BLOCK_N columns, coalesced along N (a warp
reads whole row segments), and walks down its column block accumulating each tile into an
fp32 accumulator of the tile's shape; the rows of the accumulator are summed once, after the
loop. When there are many rows and few column blocks, the rows are split over several
programs per column block: each writes one fp32 row of partial sums, and a second, tiny kernel
sums the partials in a fixed order (deterministic, no atomics). With enough column blocks the
first kernel writes y itself.

Floor (H200, x read once at ~4.25 TB/s; y is N values): 8192 x 16384 bf16 = 268 MB, ~63 us.
Not yet measured there: benchmarks/corpus.py --workloads colsum.
"""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

# Optimization 1 (tile width): at most this many columns per program. 256 bf16 columns are
# 512 contiguous bytes a row, four full 128-byte lines, so every warp's loads are whole lines;
# wider blocks would leave too few column blocks to spread over the SMs without a split.
MAX_BLOCK_N = 256
# Optimization 1 (tile size): elements per loop iteration, BLOCK_M = TILE_ELEMENTS // BLOCK_N
# rows. 4096 elements over 4 warps are 32 fp32 accumulators a thread (no spills) and 8 KB of
# bf16 per load; a guess from that arithmetic, to sweep (2048 / 4096 / 8192) on the H200.
TILE_ELEMENTS = 4096
# Optimization 2 (split over rows): aim for about this many programs per SM in the first
# kernel, so that 132 SMs hold enough loads in flight (~30 KB a SM by Little's law at 4.8 TB/s
# and ~0.8 us latency) even when x has only a few column blocks.
PROGRAMS_PER_SM = 8
# Optimization 2: a split covers at least this many rows, so that the partial sums (one fp32 row
# per split) stay under 1% of the bytes of x and each program loops long enough to pipeline.
MIN_SPLIT_ROWS = 512
# Optimization 3: pipeline depth of the loop over row tiles (the next tiles' loads are issued
# while the current one is added). A guess, to sweep with TILE_ELEMENTS.
NUM_STAGES = 3
# Optimization 4: x is streamed exactly once; keep it from pushing other lines out of L2.
X_EVICTION_POLICY = "evict_first"
# The second kernel: columns per program and partial rows per iteration (partials are a few
# hundred KB at most: 8 programs per SM x 256 columns x 4 bytes x 132 SMs).
COMBINE_BLOCK_N = 256
COMBINE_BLOCK_S = 16
# Optimization 5: fp32 values per thread that set num_warps (4 warps for a 4096-element tile).
ELEMENTS_PER_THREAD = 32


@functools.cache
def _num_sms(device_index):
    if device_index is None:
        # The CPU interpreter: one pseudo-SM, so the CPU regimes exercise both the split and
        # the unsplit path (problem.py).
        return 1
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _num_warps(block_elems):
    # Optimization 5: warps from the tile, ELEMENTS_PER_THREAD accumulators a thread, 4..16.
    return min(max(block_elems // (32 * ELEMENTS_PER_THREAD), 4), 16)


@triton.jit
def _colsum_partial_kernel(
    X,
    P,
    M,
    N,
    stride_xm,
    stride_pm,
    rows_per_split,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    X_EVICTION: tl.constexpr,
):
    # Program (pid_n, pid_s) sums rows [pid_s * rows_per_split, +rows_per_split) of column block
    # pid_n into row pid_s of P (P is y itself when there is one split).
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    row_start = pid_s * rows_per_split
    row_end = tl.minimum(row_start + rows_per_split, M)
    rows = tl.arange(0, BLOCK_M)

    # Optimization 6: pointer advancement. The pointer tile is built once (int64 rows: M * N
    # passes 2^31 at 65536 x 65536) and stepped by BLOCK_M rows per iteration.
    ptrs = X + (row_start + rows).to(tl.int64)[:, None] * stride_xm + cols[None, :]
    # Optimization 1: an elementwise fp32 accumulator of the tile's shape. Each iteration is
    # one add per element; the reduction across the BLOCK_M rows (shuffles between lanes and
    # warps) happens once per program instead of once per tile, and the sum is blocked: each
    # accumulator adds rows_per_split / BLOCK_M values in sequence, not M.
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    # Optimization 3: software pipelining of the row-tile loop.
    for start in tl.range(row_start, row_end, BLOCK_M, num_stages=NUM_STAGES):
        mask = ((start + rows) < row_end)[:, None] & col_mask[None, :]
        # Optimization 4: evict_first, x is read once.
        x = tl.load(ptrs, mask=mask, other=0.0, eviction_policy=X_EVICTION)
        acc += x.to(tl.float32)
        ptrs += BLOCK_M * stride_xm
    total = tl.sum(acc, axis=0)
    tl.store(P + pid_s * stride_pm + cols, total.to(P.dtype.element_ty), mask=col_mask)


@triton.jit
def _colsum_combine_kernel(
    P,
    Y,
    n_splits,
    N,
    stride_pm,
    BLOCK_S: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # Optimization 2 (second stage): sum the n_splits fp32 partial rows of BLOCK_N columns, in
    # the same order on every run (no atomics: the result does not depend on scheduling).
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    splits = tl.arange(0, BLOCK_S)
    acc = tl.zeros([BLOCK_S, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_splits, BLOCK_S):
        s = start + splits
        mask = (s < n_splits)[:, None] & col_mask[None, :]
        acc += tl.load(P + s[:, None] * stride_pm + cols[None, :], mask=mask, other=0.0)
    tl.store(Y + cols, tl.sum(acc, axis=0).to(Y.dtype.element_ty), mask=col_mask)


def colsum_forward(x):
    x2 = x.contiguous()
    M, N = x2.shape
    y = torch.empty(N, dtype=x2.dtype, device=x2.device)
    BLOCK_N = min(triton.next_power_of_2(N), MAX_BLOCK_N)
    # Optimization 1: as many rows as fill TILE_ELEMENTS, never more than there are rows.
    BLOCK_M = min(max(TILE_ELEMENTS // BLOCK_N, 1), triton.next_power_of_2(M))
    col_blocks = triton.cdiv(N, BLOCK_N)

    # Optimization 2: split the rows when the column blocks alone are too few programs. 65536 x
    # 2048 has 8 column blocks: unsplit, 8 programs would each stream 32 MB on 8 of 132 SMs.
    device_index = x2.device.index if x2.is_cuda else None
    if x2.is_cuda and device_index is None:
        device_index = torch.cuda.current_device()
    target = _num_sms(device_index) * PROGRAMS_PER_SM
    split = max(1, min(triton.cdiv(target, col_blocks), triton.cdiv(M, MIN_SPLIT_ROWS)))
    # Whole row tiles per split, so only the last split has a ragged tile.
    rows_per_split = triton.cdiv(triton.cdiv(M, split), BLOCK_M) * BLOCK_M
    split = triton.cdiv(M, rows_per_split)

    num_warps = _num_warps(BLOCK_M * BLOCK_N)
    if split > 1:
        partial = torch.empty((split, N), dtype=torch.float32, device=x2.device)
        _colsum_partial_kernel[(col_blocks, split)](
            x2,
            partial,
            M,
            N,
            x2.stride(0),
            partial.stride(0),
            rows_per_split,
            BLOCK_M=BLOCK_M,
            BLOCK_N=BLOCK_N,
            NUM_STAGES=NUM_STAGES,
            X_EVICTION=X_EVICTION_POLICY,
            num_warps=num_warps,
        )
        _colsum_combine_kernel[(triton.cdiv(N, COMBINE_BLOCK_N),)](
            partial,
            y,
            split,
            N,
            partial.stride(0),
            BLOCK_S=COMBINE_BLOCK_S,
            BLOCK_N=COMBINE_BLOCK_N,
        )
    else:
        _colsum_partial_kernel[(col_blocks, 1)](
            x2,
            y,
            M,
            N,
            x2.stride(0),
            0,
            rows_per_split,
            BLOCK_M=BLOCK_M,
            BLOCK_N=BLOCK_N,
            NUM_STAGES=NUM_STAGES,
            X_EVICTION=X_EVICTION_POLICY,
            num_warps=num_warps,
        )
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return colsum_forward(x)
