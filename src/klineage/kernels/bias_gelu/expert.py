"""Fused bias + GELU (tanh approximation) y = gelu_tanh(x + bias): expert version.

The grid is (row programs, column blocks). A program owns one column block of BLOCK_N
contiguous columns: it loads that block's bias once, as one fp32 row shared by every tile it
touches, then walks down the column block over 2-D tiles of BLOCK_M rows x BLOCK_N columns,
striding by the number of row programs (a persistent walk, pipelined: the next tiles' loads
are in flight while this tile's GELU and store run). Loads of x are wide and coalesced along
the row (16-byte vectors, hinted), marked evict_first; when both dimensions divide the tile,
loads and stores carry no masks. The GELU runs in fp32 as z * sigmoid(2u), its exponential an
exp2 with -2 * sqrt(2/pi) * log2(e) folded into the polynomial's two constants.

Floor (H200, x read once + y written once at ~4.25 TB/s; the bias is at most 512 KB):
16384 x 8192 bf16 = 2 x 268 MB, ~126 us. The speed of this kernel has NOT been measured on
the H200 yet (benchmarks/corpus.py --workloads bias_gelu); every constant below is a guess
from the arithmetic in its comment, to sweep there.
"""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

# Optimization 1 (tile width): at most this many contiguous columns a tile. 1024 bf16 columns
# are 2 KB a row, sixteen whole 128-byte lines, so every warp's loads are whole lines; rows up
# to 1024 columns take one column block (short_rows: N = 256, one block of 256).
MAX_BLOCK_N = 1024
# Optimization 2 (rows per program): elements a tile, BLOCK_M = TILE_ELEMENTS // BLOCK_N rows
# (16 rows of 256, 4 rows of 1024). 4096 elements over 4 warps are 32 a thread: four 16-byte
# bf16 vectors in flight per thread per tile, with no spills (x, z and y in fp32 are ~100
# registers). Without it a row of 256 columns is one program of 512 bytes: a million programs.
TILE_ELEMENTS = 4096
# Optimization 3 (persistent walk): programs per SM in the grid; each walks
# row_blocks / row_programs tiles of its column block. 4 programs a SM, each with 1-2 tiles of
# 8 KB (bf16) in flight ahead of the one it computes, are 32-64 KB a SM: above the ~30 KB
# that Little's law asks of an H200 (4.8 TB/s x ~0.8 us / 132 SMs).
PROGRAMS_PER_SM = 4
# Optimization 7 (exp2): -2 * sqrt(2/pi) * log2(e) and 0.044715 times it. With them,
# exp(-2u) = exp2(z * (GELU_K1 + GELU_K3 * z * z)): two FMAs and one MUFU.EX2 per element,
# where tl.exp(-2.0 * u) adds the multiply by log2(e) that tl.exp lowers to.
GELU_K1 = tl.constexpr(-2.0 * 0.7978845608028654 * 1.4426950408889634)
GELU_K3 = tl.constexpr(-2.0 * 0.7978845608028654 * 0.044715 * 1.4426950408889634)


@functools.cache
def _num_sms(device_index):
    if device_index is None:
        # The CPU interpreter: one pseudo-SM, so the CPU regimes give each column block a few
        # programs and some of them walk more than one tile (problem.py, multi_block).
        return 1
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@triton.jit
def _gelu_tanh(z):
    # gelu_tanh(z) = 0.5 z (1 + tanh(u)) = z * sigmoid(2u) = z / (1 + exp(-2u)), with
    # u = sqrt(2/pi) (z + 0.044715 z^3). No tanh and no cancellation: for u >> 0 the exp2
    # underflows to 0 and y = z; for u << 0 it overflows to inf and y = -0.0.
    # Optimization 7: the exponential as exp2, log2(e) folded into the constants.
    return z / (1.0 + tl.exp2(z * (GELU_K1 + GELU_K3 * z * z)))


@triton.autotune(
    # Optimization 5 (autotune table): the tile is the launcher's (TILE_ELEMENTS), so the
    # table holds what the arithmetic cannot settle: warps for the 4096-element tile (8 warps
    # = 16 elements a thread, two 16-byte bf16 vectors; 4 warps = 32, four vectors) and the
    # walk's pipeline depth (optimization 6: 2 or 3 tiles in flight). Every config computes
    # the same values at every shape. Keyed on M and N: the tile and the walk's length follow
    # from them.
    configs=[
        triton.Config({"NUM_STAGES": 3}, num_warps=8),
        triton.Config({"NUM_STAGES": 2}, num_warps=8),
        triton.Config({"NUM_STAGES": 3}, num_warps=4),
        triton.Config({"NUM_STAGES": 2}, num_warps=4),
    ],
    key=["M", "N"],
)
@triton.heuristics(
    {
        # Optimization 8: both dimensions divide into whole tiles, the unmasked path.
        "EVEN": lambda args: args["M"] % args["BLOCK_M"] == 0 and args["N"] % args["BLOCK_N"] == 0
    }
)
@triton.jit
def _bias_gelu_kernel(
    X,
    B,
    Y,
    M,
    N,
    stride_xm,
    stride_ym,
    n_row_blocks,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    EVEN: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    # Optimization 4 (hints): the column offsets are runs of BLOCK_N consecutive integers
    # starting at a multiple of BLOCK_N, so with a row stride divisible by 16 bytes (Triton
    # specialises such strides) the loads and stores are 16-byte vectors. Triton's analysis
    # infers this from pid_n * BLOCK_N + arange; the hints state it where it is relied on.
    cols = tl.max_contiguous(
        tl.multiple_of(pid_n * BLOCK_N + tl.arange(0, BLOCK_N), BLOCK_N), BLOCK_N
    )
    col_mask = cols < N
    # Optimization 1: the bias block is loaded once per program, upcast once, and broadcast
    # over every row of every tile the program walks; one masked load a program, so it needs
    # no even path. Optimization 9 (hint): evict_last, the other row programs of this column
    # block read the same lines.
    b = tl.load(B + cols, mask=col_mask, other=0.0, eviction_policy="evict_last")
    b = b.to(tl.float32)[None, :]
    rows_in_tile = tl.arange(0, BLOCK_M)
    # Optimization 3: persistent walk down the column block: row tiles pid_m, pid_m + the
    # number of row programs, ... Optimization 6 (software pipelining): NUM_STAGES tiles'
    # loads in flight, a depth the autotune table picks.
    for rb in tl.range(pid_m, n_row_blocks, tl.num_programs(0), num_stages=NUM_STAGES):
        rows = rb * BLOCK_M + rows_in_tile
        # int64 offsets: M * N passes 2^31 at 65536 x 65536.
        x_ptrs = X + rows.to(tl.int64)[:, None] * stride_xm + cols[None, :]
        y_ptrs = Y + rows.to(tl.int64)[:, None] * stride_ym + cols[None, :]
        # Optimization 9 (hint): x is streamed exactly once; evict_first keeps it from pushing
        # the bias out of L2. Upcast right after the load: the GELU runs in fp32.
        if EVEN:
            x = tl.load(x_ptrs, eviction_policy="evict_first")
            y = _gelu_tanh(x.to(tl.float32) + b)
            tl.store(y_ptrs, y.to(Y.dtype.element_ty))
        else:
            mask = (rows < M)[:, None] & col_mask[None, :]
            x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy="evict_first")
            y = _gelu_tanh(x.to(tl.float32) + b)
            tl.store(y_ptrs, y.to(Y.dtype.element_ty), mask=mask)


def bias_gelu_forward(x, bias):
    x = x.contiguous()
    bias = bias.contiguous()
    M, N = x.shape
    y = torch.empty_like(x)
    BLOCK_N = min(triton.next_power_of_2(N), MAX_BLOCK_N)
    # Optimization 2: as many rows as fill TILE_ELEMENTS, never more than there are rows.
    BLOCK_M = min(max(TILE_ELEMENTS // BLOCK_N, 1), triton.next_power_of_2(M))
    row_blocks = triton.cdiv(M, BLOCK_M)
    col_blocks = triton.cdiv(N, BLOCK_N)
    # Optimization 3: about PROGRAMS_PER_SM programs a SM in all, spread over the column
    # blocks; never more row programs than row tiles. 16384 x 8192 on 132 SMs: 8 column
    # blocks of 66 programs, each walking 62-63 tiles of 4 x 1024.
    device_index = x.device.index if x.is_cuda else None
    if x.is_cuda and device_index is None:
        device_index = torch.cuda.current_device()
    row_programs = triton.cdiv(_num_sms(device_index) * PROGRAMS_PER_SM, col_blocks)
    # A 2-D grid: column blocks on axis 1 (256 in the wide regime; CUDA allows 65535).
    grid = (min(row_blocks, row_programs), col_blocks)
    _bias_gelu_kernel[grid](
        x,
        bias,
        y,
        M,
        N,
        x.stride(0),
        y.stride(0),
        row_blocks,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
    )
    return y


class ModelNew(nn.Module):
    def forward(self, x, bias):
        return bias_gelu_forward(x, bias)
