"""LayerNorm forward, y = (x - mean) * rsqrt(var + eps) * weight + bias: expert version.

Two kernels, chosen by the row length N:
  1. `_layer_norm_fwd_kernel` (N <= MAX_FUSED_N): the whole row sits in registers, so x is read
     from HBM once and y written once; mean and variance are two reductions over registers
     (the exact two-pass variance, free here). Each program normalises a 2-D tile of BLOCK_M
     rows x BLOCK_N columns: many rows per program when rows are short, and weight and bias
     are loaded once per program and shared by its BLOCK_M rows.
  2. `_layer_norm_fwd_looped_kernel` (N > MAX_FUSED_N): one program per row walks the row in
     BLOCK_N chunks twice: first the sum and sum of squares (fp32, shifted by the row's first
     element), then the normalisation. The second pass re-reads x, mostly from L2.

The floor is x read once plus y written once: 16384 x 4096 bf16 = 256 MiB, ~63 us at
4.25 TB/s on an H200. Anchors there: torch eager 59% of the floor, torch.compile 65%.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = 1e-5

# Optimization 1 (limit): rows up to 8192 elements are normalised in one pass from registers.
# 8192 elements over 8 warps is 32 fp32 values per thread for x (plus <= 32 each for weight and
# bias): no spills. Past that (65536 at 16 warps = 128 per thread) the kernel spills to local
# memory, so longer rows take the looped kernel (optimization 5).
MAX_FUSED_N = 8192
# Optimization 2 (size): elements per program tile, i.e. BLOCK_M = TILE_ELEMENTS // BLOCK_N
# rows per program for short rows. 8192 elements = 16 KB of bf16 in flight per program, which
# with 2-3 programs resident per SM covers the ~30 KB that Little's law asks of an H200
# (4.8 TB/s x ~0.8 us / 132 SMs). That arithmetic said 8192; the H200 sweep (below) chose
# 16384: 32 KB per program, 4 rows of 4096 on 16 warps.
TILE_ELEMENTS = 16384
# Optimization 5 (chunk): elements per loop iteration of the looped kernel (16 KB of bf16).
LOOP_BLOCK_N = 8192
# Optimization 6 (target): elements each thread holds per tile. 32 bf16 values are four 16-byte
# vector loads per thread in flight; fewer leaves the loads latency-bound, more spills.
ELEMENTS_PER_THREAD = 32
# Optimization 6 (hint): the single-pass kernel's cache policy for x, streamed exactly once
# ("" = the default policy). A launcher constant so a sweep can measure it.
X_EVICTION_POLICY = "evict_first"
# evict_last on the weight (and bias): every program reads them; "" = default policy.
PARAM_EVICTION_POLICY = ""
# Measured on the H200 (benchmarks/sweeps_2026-11-30.sh): at 16384x4096 bf16 one row per
# program is slow here (0.095 ms), 2 rows on 8 warps with evict_first on x 0.0776 ms (0.0920
# without the hint), 4 rows on 16 warps (TILE_ELEMENTS 16384) 0.0743-0.0753 ms, the best found.
# evict_last on weight and bias made no difference there (0.0743 vs 0.0753 ms) and cost at
# 262144x128 (0.0567 vs 0.0392 ms), so the parameters use the default policy.
ONE_ROW_DEFAULT_POLICY = False


@triton.jit
def _layer_norm_fwd_kernel(
    X,
    W,
    B,
    Y,
    stride_x,
    stride_y,
    M,
    N,
    eps,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    X_EVICTION: tl.constexpr,
    PARAM_EVICTION: tl.constexpr,
):
    # Optimization 2: a program owns BLOCK_M rows x BLOCK_N columns. At N = 128 a one-row
    # program would move 256 bytes and spend its time on launch and reduction latency;
    # 64 rows per program move 16 KB, and 262144 rows take 4096 programs instead of 262144.
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < M
    col_mask = cols < N
    mask = row_mask[:, None] & col_mask[None, :]

    # int64 offsets: M * N reaches 2^31 at 262144 x 8192.
    offs_x = rows.to(tl.int64)[:, None] * stride_x + cols[None, :]
    # Optimization 6 (hint): evict_first, x is streamed exactly once; keep it from pushing the
    # parameters (and other programs' lines) out of L2.
    # Optimization 3: upcast to fp32 right after the load; mean, variance and rsqrt run in
    # fp32 for fp16/bf16 inputs (a bf16 sum of 4096 terms keeps ~3 significant digits).
    x = tl.load(X + offs_x, mask=mask, other=0.0, eviction_policy=X_EVICTION).to(tl.float32)

    # The row load is issued before the parameter loads so its HBM latency overlaps them.
    # Optimization 4: weight and bias are loaded once per program and broadcast over its
    # BLOCK_M rows. A one-row program reloads 2 x 16 KB of fp32 parameters at N = 4096, twice
    # the bytes of the bf16 row itself: L2 traffic and registers that the rows could use.
    # evict_last: every program reads the same parameters, keep them resident in L2.
    w = tl.load(W + cols, mask=col_mask, other=0.0, eviction_policy=PARAM_EVICTION).to(tl.float32)
    b = tl.load(B + cols, mask=col_mask, other=0.0, eviction_policy=PARAM_EVICTION).to(tl.float32)

    # Optimization 1: single pass over HBM; the row stays in registers, so the variance is the
    # exact two-pass form sum((x - mean)^2) at no extra memory traffic (no E[x^2] - E[x]^2
    # cancellation). Masked columns are 0 in the sum and zeroed again after centring.
    mean = tl.sum(x, axis=1) / N
    xc = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(xc * xc, axis=1) / N
    rstd = tl.rsqrt(var + eps)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]

    offs_y = rows.to(tl.int64)[:, None] * stride_y + cols[None, :]
    tl.store(Y + offs_y, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _layer_norm_fwd_looped_kernel(
    X,
    W,
    B,
    Y,
    stride_x,
    stride_y,
    N,
    eps,
    BLOCK_N: tl.constexpr,
):
    # Optimization 5: a row too long for registers (65536 bf16 = 128 KB) is walked in
    # BLOCK_N chunks, twice. One program per row: 1024 long rows are ~8 programs per SM.
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    cols = tl.arange(0, BLOCK_N)

    # Pass 1: sum and sum of squares in ONE read (the textbook three-pass form reads x once
    # for the mean and again for the variance). Optimization 3: fp32, in elementwise
    # accumulators reduced once after the loop. The sums are of d = x - K with K the row's
    # first element ("shifted data"): var = E[d^2] - E[d]^2 then loses nothing when
    # |mean| >> std, where the unshifted E[x^2] - E[x]^2 cancels catastrophically in fp32.
    # evict_last: pass 2 reads the same bytes again; keep them in L2 (50 MB on an H200,
    # ~300 rows of 128 KB in flight at once).
    shift = tl.load(x_row).to(tl.float32)
    acc_sum = tl.zeros([BLOCK_N], dtype=tl.float32)
    acc_sq = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        offs = start + cols
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_last")
        d = tl.where(mask, x.to(tl.float32) - shift, 0.0)
        acc_sum += d
        acc_sq += d * d
    mean_d = tl.sum(acc_sum, axis=0) / N
    var = tl.maximum(tl.sum(acc_sq, axis=0) / N - mean_d * mean_d, 0.0)
    mean = shift + mean_d
    rstd = tl.rsqrt(var + eps)

    # Pass 2: normalise, walking the chunks in reverse: the chunks pass 1 read last are the
    # likeliest still in L1/L2, so they are consumed first. Now x is done with: evict_first.
    num_chunks = tl.cdiv(N, BLOCK_N)
    for i in range(0, num_chunks):
        offs = (num_chunks - 1 - i) * BLOCK_N + cols
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        w = tl.load(W + offs, mask=mask, other=0.0, eviction_policy="evict_last")
        b = tl.load(B + offs, mask=mask, other=0.0, eviction_policy="evict_last")
        y = (x.to(tl.float32) - mean) * rstd * w.to(tl.float32) + b.to(tl.float32)
        tl.store(y_row + offs, y.to(Y.dtype.element_ty), mask=mask)


def _num_warps(block_elements):
    # Optimization 6: num_warps from the block size, so each thread holds ~ELEMENTS_PER_THREAD
    # elements: 4 warps up to 4096 elements, 8 at 8192, 16 at 16384 (Liger's calculate_settings
    # makes the same kind of choice). A fixed 4 warps gives 64 fp32 per thread at N = 8192.
    return min(max(block_elements // (32 * ELEMENTS_PER_THREAD), 4), 16)


def layer_norm_forward(x, weight, bias, eps=EPS):
    shape = x.shape
    N = shape[-1]
    x2 = x.reshape(-1, N).contiguous()
    M = x2.shape[0]
    y = torch.empty_like(x2)
    if N <= MAX_FUSED_N:
        BLOCK_N = triton.next_power_of_2(N)
        # Optimization 2: as many rows as fill TILE_ELEMENTS, never more than there are rows.
        BLOCK_M = min(max(TILE_ELEMENTS // BLOCK_N, 1), triton.next_power_of_2(M))
        grid = (triton.cdiv(M, BLOCK_M),)
        _layer_norm_fwd_kernel[grid](
            x2,
            weight,
            bias,
            y,
            x2.stride(0),
            y.stride(0),
            M,
            N,
            eps,
            BLOCK_M=BLOCK_M,
            BLOCK_N=BLOCK_N,
            X_EVICTION=X_EVICTION_POLICY if BLOCK_M > 1 or not ONE_ROW_DEFAULT_POLICY else "",
            PARAM_EVICTION=PARAM_EVICTION_POLICY,
            num_warps=_num_warps(BLOCK_M * BLOCK_N),
        )
    else:
        _layer_norm_fwd_looped_kernel[(M,)](
            x2,
            weight,
            bias,
            y,
            x2.stride(0),
            y.stride(0),
            N,
            eps,
            BLOCK_N=LOOP_BLOCK_N,
            num_warps=_num_warps(LOOP_BLOCK_N),
        )
    return y.reshape(shape)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=EPS):
        super().__init__()
        self.eps = eps
        # Same parameters, same shapes, created in the same order as the reference's.
        self.weight = nn.Parameter(torch.randn(hidden_size))
        self.bias = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x):
        return layer_norm_forward(x, self.weight, self.bias, self.eps)
