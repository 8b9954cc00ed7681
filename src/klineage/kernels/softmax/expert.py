"""Row-wise softmax over the last dimension: expert version.

Two kernels, picked by the row length N (BLOCK_N = next_power_of_2(N)):

  * BLOCK_N <= MAX_FUSED_SIZE (16384): `_softmax_fused_kernel`. The row stays in registers, so
    x is read once and y written once: exactly the bytes floor. Short rows are packed
    BLOCK_M to a program (a 2-D [BLOCK_M, BLOCK_N] tile), and when there are many short rows a
    persistent grid of a few programs per SM loops over the row blocks.
  * BLOCK_N > MAX_FUSED_SIZE: `_softmax_online_kernel`. One program per row loops over tiles
    of ONLINE_BLOCK columns: pass 1 keeps a running max and a running sum (rescaled when the
    max grows), pass 2 re-reads the row (mostly from L2) and writes exp(x - max) / sum.

Floor (H200, read once + write once at ~4.25 TB/s): 8192 x 8192 bf16 = 268 MB, ~63 us.
Anchors measured there: torch eager 25%, torch.compile 40%, Liger 94%, a one-block kernel 91%.
"""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

# exp(x) = exp2(x * log2(e)).
_LOG2E = tl.constexpr(
    1.4426950408889634
)  # constexpr: Triton 3.6 rejects plain globals in @jit code

# Optimization 2/3 threshold: rows whose next_power_of_2 is at most this many columns are held
# in registers in one pass; longer rows take the online path. 16384 columns over 16 warps
# (512 threads) is 32 fp32 values per thread, ~the most that fits next to the exps without
# spilling (Liger goes to 65536 with 32 warps = 64 per thread, i.e. one CTA per SM and no
# overlap between one row's reductions and the next row's loads). A guess to measure on the
# H200: 256 x 131072 bf16 (256 KB a row) cannot be held in registers at any setting.
MAX_FUSED_SIZE = 16384
# Tile of the online path (swept on the H200: 16384 gives 0.053 ms at 256x131072 bf16, 8192
# gives 0.061, 4096 gives 0.076). The original reasoning, for 8192: 8192 columns over 16 warps = 16 values per thread, two 16-byte
# bf16 vector loads in flight per thread; small enough that two 512-thread CTAs fit on an SM
# (<= 64 registers per thread), which is what 256 long rows need to run in one wave on 132 SMs.
ONLINE_BLOCK = 16384
# Optimization 1: pack rows into a [BLOCK_M, BLOCK_N] tile of about this many elements.
ROW_BLOCK_ELEMS = 4096
# Optimization 6: rows this short (<= 1024 columns, 2 KB of bf16) get the persistent grid.
SHORT_ROW = 1024
# Optimization 6: resident programs per SM for the persistent grid, as warps. 32 warps per SM
# is 50% occupancy: 65536 registers / (32 warps * 32 threads) = 64 registers per thread, which
# a 16-values-per-thread tile with its exps needs. A guess to measure (48 or 64 may win).
PERSISTENT_WARPS_PER_SM = 32
# Software-pipelining depth of the persistent loop over row blocks (the next block's loads are
# issued while the current block reduces). Only meaningful when a program loops.
PERSISTENT_STAGES = 2
# Optimization 5: values per thread that set num_warps. Swept on the H200 (8, 16, 32, 64;
# benchmarks/sweeps_2026-11-30.sh): 32 is best or tied everywhere: 8192x8192 bf16 0.0700 ms
# vs 0.0725 at 16 (Liger's 16 warps), 262144x64 0.0229 vs 0.0249 ms, 4096x4096 fp32 0.0367 ms.
ELEMENTS_PER_THREAD = 32


def _num_warps(block_elems):
    # Optimization 5: warps from the block size, ELEMENTS_PER_THREAD values per thread. Fewer
    # threads per element and each thread holds more values (register spills past ~64 fp32
    # values); more threads and the row reduction crosses more warps through shared memory (one
    # barrier per level) for little work each. Clamped to 4..16 warps.
    return min(max(block_elems // (32 * ELEMENTS_PER_THREAD), 4), 16)


@functools.cache
def _num_sms(device_index):
    if device_index is None:
        # The CPU interpreter: one pseudo-SM, so the persistent loop runs several iterations on
        # the CPU regimes and is checked there.
        return 1
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@triton.jit
def _softmax_fused_kernel(
    Y_ptr,
    X_ptr,
    stride_y,
    stride_x,
    n_rows,
    n_cols,
    num_row_blocks,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    # int64 row indices, so rows * stride does not overflow when M * N passes 2^31.
    row_offs = tl.arange(0, BLOCK_M).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols

    # Optimization 6: persistent grid. The launcher starts about (SMs x resident programs per
    # SM) programs for many short rows and each strides over the row blocks, instead of one
    # short-lived CTA per 8 KB block (262144 x 64 bf16 = 4096 blocks): no CTA launch/retire and
    # index setup per block, no tail wave, and with NUM_STAGES the next block's loads overlap
    # this block's reductions. Without it the grid is num_row_blocks and this loop runs once.
    for row_block in tl.range(pid, num_row_blocks, num_programs, num_stages=NUM_STAGES):
        # Optimization 1: several rows per program. A [BLOCK_M, BLOCK_N] tile: with N = 64 a row
        # is 128 bytes, one row per program would leave a 4-warp CTA 16x over-provisioned (or
        # mostly masked) and make 262144 CTAs; BLOCK_M = 64 rows give each thread 16 elements
        # (two 16-byte vector loads) and each row reduction stays inside a few lanes of a warp.
        rows = row_block * BLOCK_M + row_offs
        # Rows past n_rows in the last block re-read the last row (clamped, an L1 hit) rather
        # than being masked to -inf, which would make their max -inf and their sum 0 (NaN
        # lanes); their results are never stored.
        rows_in = tl.minimum(rows, n_rows - 1)
        x = tl.load(
            X_ptr + rows_in[:, None] * stride_x + cols[None, :],
            mask=col_mask[None, :],
            other=-float("inf"),
        )

        # Optimization 2: one pass in registers. The whole row is loaded once and max, exp, sum
        # and the division all happen on registers, so HBM sees exactly one read and one write
        # per element (the floor); a three-kernel max/sum/normalize version reads x 3 times.
        # Optimization 4: exp2 with log2(e) prescaling. exp(x - m) = exp2(x * log2e - m * log2e)
        # with m * log2e computed once per row: each element costs one FFMA + one MUFU.EX2,
        # where tl.exp(x - m) lowers to subtract, multiply by log2e, ex2 (one more FP32
        # instruction per element). Small in a memory-bound kernel, but it is issue slots saved
        # where instructions per byte are highest (the 64-column tiles). fp32 arithmetic always.
        x = x.to(tl.float32)
        m_log2 = tl.max(x, axis=1) * _LOG2E
        e = tl.exp2(x * _LOG2E - m_log2[:, None])
        d = tl.sum(e, axis=1)
        y = e / d[:, None]
        mask = (rows < n_rows)[:, None] & col_mask[None, :]
        tl.store(
            Y_ptr + rows[:, None] * stride_y + cols[None, :],
            y.to(Y_ptr.dtype.element_ty),
            mask=mask,
        )


@triton.jit
def _softmax_online_kernel(
    Y_ptr,
    X_ptr,
    stride_y,
    stride_x,
    n_cols,
    BLOCK_N: tl.constexpr,
):
    # Optimization 3: online pass for rows longer than one block. One program per row loops over
    # the row in BLOCK_N tiles; the whole row never has to fit in registers.
    row = tl.program_id(0).to(tl.int64)
    x_row = X_ptr + row * stride_x
    y_row = Y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK_N)

    # Pass 1: running max m and running sum d of exp(x - m), d rescaled by exp(m_old - m_new)
    # when a tile raises the max. One read of the row instead of two (a max pass, then a sum
    # pass), and one exp2 per element. evict_last keeps the row in L2 for pass 2: at 256 KB a
    # bf16 row and ~256 rows in flight, the not-yet-normalized halves (~33 MB on average) fit
    # the H200's 50 MB L2, so pass 2 mostly reads L2, not HBM.
    m = -float("inf")
    d = 0.0
    for start in tl.range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf"), eviction_policy="evict_last")
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # While every value so far is -inf (e.g. a masked prefix longer than a tile), rescale
        # against 0 instead of -inf: (-inf) - (-inf) would be NaN, and the sum must stay 0.
        m_ref = tl.where(m_new == -float("inf"), 0.0, m_new) * _LOG2E
        # Optimization 4: exp2 with log2(e) prescaling (see the fused kernel): m_ref is scaled
        # once per tile, each element is one FFMA + one EX2.
        d = d * tl.exp2(m * _LOG2E - m_ref) + tl.sum(tl.exp2(x * _LOG2E - m_ref), axis=0)
        m = m_new

    m_log2 = m * _LOG2E
    # Pass 2: normalize and store. x is not needed after this (evict_first), nor is y in this
    # kernel, so neither should push pass-1 rows of other programs out of L2.
    for start in tl.range(0, n_cols, BLOCK_N):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf"), eviction_policy="evict_first")
        y = tl.exp2(x.to(tl.float32) * _LOG2E - m_log2) / d
        tl.store(
            y_row + offs, y.to(Y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first"
        )


def softmax_forward(x):
    n_cols = x.shape[-1]
    x2d = x.contiguous().view(-1, n_cols)
    n_rows = x2d.shape[0]
    y2d = torch.empty_like(x2d)
    BLOCK_N = triton.next_power_of_2(n_cols)

    if BLOCK_N <= MAX_FUSED_SIZE:
        # Optimizations 1 and 2: the row fits one block; pack short rows BLOCK_M to a program.
        BLOCK_M = max(1, ROW_BLOCK_ELEMS // BLOCK_N)
        num_warps = _num_warps(BLOCK_M * BLOCK_N)
        num_row_blocks = triton.cdiv(n_rows, BLOCK_M)
        grid = num_row_blocks
        if BLOCK_N <= SHORT_ROW:
            # Optimization 6: persistent grid for many short rows.
            device_index = x2d.device.index if x2d.is_cuda else None
            if x2d.is_cuda and device_index is None:
                device_index = torch.cuda.current_device()
            resident = _num_sms(device_index) * max(1, PERSISTENT_WARPS_PER_SM // num_warps)
            grid = min(num_row_blocks, resident)
        _softmax_fused_kernel[(grid,)](
            y2d,
            x2d,
            y2d.stride(0),
            x2d.stride(0),
            n_rows,
            n_cols,
            num_row_blocks,
            BLOCK_M=BLOCK_M,
            BLOCK_N=BLOCK_N,
            NUM_STAGES=PERSISTENT_STAGES,
            num_warps=num_warps,
        )
    else:
        # Optimization 3: the online two-pass kernel, one program per row.
        _softmax_online_kernel[(n_rows,)](
            y2d,
            x2d,
            y2d.stride(0),
            x2d.stride(0),
            n_cols,
            BLOCK_N=ONLINE_BLOCK,
            num_warps=_num_warps(ONLINE_BLOCK),
        )
    return y2d.view(x.shape)


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax_forward(x)
