"""y = x @ w for a small output (M, N in 32..128) and a long K: expert version, split-K.

Two tricks, as a kernel engineer writes this weight-gradient shape:

1. Output tiles with tl.dot. A program owns a [BLOCK_M, BLOCK_N] tile of y and feeds
   [BLOCK_M, BLOCK_K] x [BLOCK_K, BLOCK_N] blocks to the tensor cores (fp32 accumulator), so
   each element of x is read once per column tile and each of w once per row tile (x once at
   every GPU regime, w twice at tall_k_fp16's two row tiles), w along its rows, instead of
   M or N times, w down its columns.
2. Split over K. 64 x 64 outputs are a single tile, one program for 132 SMs; so program
   (t, s) of a (tiles, SPLIT) grid reduces only chunk s of K (a whole number of BLOCK_K steps)
   into row s of an fp32 workspace (SPLIT, M * N), and a second kernel adds the SPLIT rows of
   each output in a fixed order and casts to y's dtype: deterministic (no atomics, the sum does
   not depend on which program finishes first), and fp32 all the way for fp16/bf16 inputs.

SPLIT aims at PROGRAMS_PER_SM programs a SM in the first kernel, at most MAX_SPLIT. On the
H200 every GPU regime gets 512 programs of 8 BLOCK_K steps (problem.py). The price is the
workspace, written once and read once: SPLIT * M * N * 4 bytes each way.

Floor (H200, x and w read once at ~4.25 TB/s), and what this kernel moves with its workspace:
wgrad_bf16 67.1 MB, ~15.8 us; 83.9 MB with 2 x 8.4 MB of workspace, ~19.7 us at best (80%).
tall_k_fp16 41.9 MB, ~9.9 us; 50.3 MB, ~11.8 us (83%), if L2 serves w's second read (the
two tiles of a split run side by side), else 58.7 MB. fp32 67.1 MB, ~15.8 us; 71.3 MB, ~16.8 us
(94%). Not yet measured there: benchmarks/corpus.py --workloads skinny_matmul.
"""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

# Optimization 1 (output tile): at most 64 x 64 outputs a program, the corpus matmul's tile;
# at least 16 a side, the least tl.dot takes. The regimes' outputs fit one or two tiles.
MAX_BLOCK_MN = 64
MIN_BLOCK_MN = 16
# Optimization 1: K per tl.dot. 64 x 64 bf16 blocks of x and w are 8 KB each a step.
BLOCK_K = 64
# Optimization 2 (split over K): aim for about this many first-kernel programs a SM, so that
# 132 SMs keep enough loads in flight (~32 KB a SM by Little's law at 4.25 TB/s and ~1 us of
# latency: two 16 KB steps of one program) even though the output has a single tile.
PROGRAMS_PER_SM = 4
# Optimization 2: at most this many splits, so the workspace (SPLIT * M * N fp32, written and
# read once) stays at a quarter of the input bytes or less at the GPU regimes (8.4 MB each way
# against 67 MB at 64 x 64 x 256K bf16). A guess from that arithmetic, to sweep (128..1024).
MAX_SPLIT = 512
# Optimization 3: pipeline depth of the K loop (the next steps' loads issued while tl.dot
# runs): 3 stages of 16 KB fit shared memory many times over. A guess, to sweep.
NUM_STAGES = 3
NUM_WARPS = 4
# The second kernel: outputs a program and partial rows an iteration. 64 x 64 outputs of 512
# splits are 8.4 MB: 128 programs of 32 outputs read it 64 rows (8 KB) at a time.
COMBINE_BLOCK_MN = 32
COMBINE_BLOCK_S = 64


@functools.cache
def _num_sms(device_index):
    if device_index is None:
        # The CPU interpreter: one pseudo-SM, so the CPU regimes split K only a few ways and
        # a chunk can hold several BLOCK_K steps (problem.py).
        return 1
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _block(n):
    # Optimization 1: the tile side covers a small output whole, padded to a power of two.
    return min(MAX_BLOCK_MN, max(MIN_BLOCK_MN, triton.next_power_of_2(n)))


@triton.jit
def _split_k_partial_kernel(
    x_ptr,
    w_ptr,
    ws_ptr,
    M,
    N,
    K,
    k_per_split,
    stride_xm,
    stride_xk,
    stride_wk,
    stride_wn,
    stride_ws,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    # Program (tile, split) multiplies chunk `split` of K for output tile `tile` (row-major
    # over the tiles of y) into row `split` of the workspace.
    tile = tl.program_id(0)
    split = tl.program_id(1)
    tiles_n = tl.cdiv(N, BLOCK_N)
    offs_m = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    in_m = offs_m < M
    in_n = offs_n < N
    # Optimization 2: this program's chunk of K. k_per_split is a multiple of BLOCK_K, so only
    # the last chunk has a ragged step. Offsets stay in int32: the regimes' largest are 2^24
    # elements (x at 128 x 128K, w at 256K x 64).
    k_start = split * k_per_split
    k_end = tl.minimum(k_start + k_per_split, K)

    # Pointer advancement: the pointer tiles are built once and stepped by BLOCK_K.
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + (k_start + offs_k)[None, :] * stride_xk
    w_ptrs = w_ptr + (k_start + offs_k)[:, None] * stride_wk + offs_n[None, :] * stride_wn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # Optimization 3: software pipelining of the K loop.
    for k in tl.range(k_start, k_end, BLOCK_K, num_stages=NUM_STAGES):
        in_k = (k + offs_k) < k_end
        x = tl.load(x_ptrs, mask=in_m[:, None] & in_k[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=in_k[:, None] & in_n[None, :], other=0.0)
        # Optimization 1: the tile product on the tensor cores, accumulated in fp32.
        if x_ptr.dtype.element_ty == tl.float32:
            # fp32 inputs: exact fp32 products (TF32 would miss the 1e-4 tolerance).
            acc = tl.dot(x, w, acc, input_precision="ieee")
        else:
            acc = tl.dot(x, w, acc)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    # The workspace row is y's M * N outputs row-major, in fp32 (no rounding before the sum).
    ws_ptrs = ws_ptr + split * stride_ws + offs_m[:, None] * N + offs_n[None, :]
    tl.store(ws_ptrs, acc, mask=in_m[:, None] & in_n[None, :])


@triton.jit
def _split_k_combine_kernel(
    ws_ptr,
    y_ptr,
    MN,
    N,
    n_splits,
    stride_ws,
    stride_ym,
    stride_yn,
    BLOCK_S: tl.constexpr,
    BLOCK_MN: tl.constexpr,
):
    # Optimization 2 (second stage): the n_splits partials of BLOCK_MN outputs, BLOCK_S rows at
    # a time into a [BLOCK_S, BLOCK_MN] fp32 accumulator, summed over its rows once at the end:
    # the same order on every run.
    offs = tl.program_id(0) * BLOCK_MN + tl.arange(0, BLOCK_MN)
    in_mn = offs < MN
    splits = tl.arange(0, BLOCK_S)
    acc = tl.zeros((BLOCK_S, BLOCK_MN), dtype=tl.float32)
    for start in range(0, n_splits, BLOCK_S):
        s = start + splits
        mask = (s < n_splits)[:, None] & in_mn[None, :]
        acc += tl.load(ws_ptr + s[:, None] * stride_ws + offs[None, :], mask=mask, other=0.0)
    total = tl.sum(acc, axis=0)
    y_ptrs = y_ptr + (offs // N) * stride_ym + (offs % N) * stride_yn
    tl.store(y_ptrs, total.to(y_ptr.dtype.element_ty), mask=in_mn)


def skinny_matmul(x, w):
    assert x.ndim == 2 and w.ndim == 2 and x.shape[1] == w.shape[0], "incompatible shapes"
    M, K = x.shape
    N = w.shape[1]
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    BLOCK_M, BLOCK_N = _block(M), _block(N)
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)

    # Optimization 2: as many splits as bring the programs to PROGRAMS_PER_SM a SM, at most
    # MAX_SPLIT and at most one per BLOCK_K step of K.
    device_index = x.device.index if x.is_cuda else None
    if x.is_cuda and device_index is None:
        device_index = torch.cuda.current_device()
    target = _num_sms(device_index) * PROGRAMS_PER_SM
    split = max(1, min(triton.cdiv(target, tiles), MAX_SPLIT, triton.cdiv(K, BLOCK_K)))
    # Whole BLOCK_K steps a chunk; recount the splits so that none is empty.
    k_per_split = triton.cdiv(triton.cdiv(K, split), BLOCK_K) * BLOCK_K
    split = triton.cdiv(K, k_per_split)

    workspace = torch.empty((split, M * N), dtype=torch.float32, device=x.device)
    _split_k_partial_kernel[(tiles, split)](
        x,
        w,
        workspace,
        M,
        N,
        K,
        k_per_split,
        x.stride(0),
        x.stride(1),
        w.stride(0),
        w.stride(1),
        workspace.stride(0),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        NUM_STAGES=NUM_STAGES,
        num_warps=NUM_WARPS,
    )
    _split_k_combine_kernel[(triton.cdiv(M * N, COMBINE_BLOCK_MN),)](
        workspace,
        y,
        M * N,
        N,
        split,
        workspace.stride(0),
        y.stride(0),
        y.stride(1),
        BLOCK_S=COMBINE_BLOCK_S,
        BLOCK_MN=COMBINE_BLOCK_MN,
    )
    return y


class ModelNew(nn.Module):
    def forward(self, x, w):
        return skinny_matmul(x, w)
