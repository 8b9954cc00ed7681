"""Expert Triton matmul C = A @ B (fp16/bf16/fp32 in, fp32 accumulation, output in input dtype).

Two kernels, one chosen at launch:

- `_matmul_kernel`: the pointer-based kernel of the Triton tutorial, as an expert writes it:
  tiled tl.dot K loop, grouped program order, autotuned tiles and pipeline depth, a mask-free
  K loop when BLOCK_SIZE_K divides K, pointer advancement and contiguity hints. It runs
  everywhere (CPU interpreter, pre-Hopper GPUs, fp32, unaligned strides).
- `_matmul_tma_kernel`: the same tiling on Hopper (compute capability >= 9) with tensor
  descriptors, so tiles move global -> shared memory through the TMA engine instead of
  per-thread cp.async address arithmetic. Used only for contiguous, 16-byte aligned fp16/bf16
  operands on a CUDA device outside the interpreter, and only when the installed Triton has
  `tl.make_tensor_descriptor` and `triton.set_allocator` (both present in 3.6 and 3.9).
"""

import functools
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

# ---------------------------------------------------------------------------------------------
# Optimization 3: autotune table (<= 8 configs, every one correct at any shape; the autotuner
# keys on M, N, K and, implicitly, on the tensors' dtypes). Tile choice is the largest single
# lever on Hopper: 128x256x64 with 8 warps (two warpgroups issuing wgmma) reaches ~85-95% of
# cuBLAS at 4096^3-8192^3 bf16 in published Triton benchmarks, while the fixed 64x64x32 tile of a
# first attempt sits near 30% (shared/ANCHORS.md): small tiles re-read A and B from L2 many
# more times (operand traffic per FLOP ~ 1/BM + 1/BN) and cannot keep the tensor cores fed.
# Optimization 4: software pipelining. num_stages > 1 in every config makes the compiler keep
# num_stages - 1 tiles of A and B in flight (cp.async / TMA into a ring of shared-memory
# buffers) while the tensor cores work on the current one, hiding the ~600-800-cycle global
# memory latency. Shared memory per stage is (BM*BK + BK*BN) * 2 bytes: 48 KB for 128x256x64,
# so 3 stages (144 KB) fit the H200's 227 KB per block, 4 stages would not.
# (tl.range(..., num_stages=...) exists in both Triton 3.6 and 3.9, but the per-config
# num_stages already pipelines the single K loop, so the plain loop is kept.)
# All sizes below are starting points from the Triton tutorials / Hopper practice; which one
# wins per regime must be measured on the H200.
# ---------------------------------------------------------------------------------------------
_CONFIGS = [
    # Large squares (4096^3, 8192^3 bf16): the known-good Hopper config.
    triton.Config(
        {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
        num_warps=8,
        num_stages=3,
    ),
    # Same tile area transposed (better when N is the short side).
    triton.Config(
        {"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
        num_warps=8,
        num_stages=3,
    ),
    # 128x128x64: 32 KB a stage, so 4 stages; 2048^3 gives 256 tiles (~2 waves on 132 SMs).
    triton.Config(
        {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
        num_warps=4,
        num_stages=4,
    ),
    triton.Config(
        {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
        num_warps=8,
        num_stages=4,
    ),
    # Tutorial's Ampere/Hopper staple: wide in N, thin K, deep pipeline.
    triton.Config(
        {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8},
        num_warps=4,
        num_stages=4,
    ),
    # Mid-size tiles: more programs when the matrix is small (occupancy over reuse).
    triton.Config(
        {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
        num_warps=4,
        num_stages=4,
    ),
    triton.Config(
        {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
        num_warps=4,
        num_stages=4,
    ),
    # Skinny M (M = 16, N = K = 8192): one row tile, so the grid is N / BLOCK_SIZE_N programs;
    # BN = 64 gives 128 programs for 132 SMs (one wave), and BK = 128 keeps 16 KB of B a stage
    # in flight per SM, enough bytes in flight to stream B near the bandwidth floor.
    triton.Config(
        {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8},
        num_warps=4,
        num_stages=4,
    ),
]


# Safety, not speed: the A/B ring of a config needs num_stages * (BM*BK + BK*BN) * itemsize bytes
# of shared memory. Every table entry fits for fp16/bf16 (at most 144 KB), but fp32 operands
# double it (128x256x64 s3 = 288 KB > the H200's 227 KB per block), and a config that does not
# fit fails to launch with OutOfResources. Drop those before tuning; 160 KB leaves >= 64 KB for
# the epilogue (layout-conversion scratch, the TMA store tile of C).
_SMEM_PIPELINE_BUDGET = 160 * 1024


def _pipeline_smem_bytes(config, itemsize):
    kw = config.kwargs
    tile_elems = kw["BLOCK_SIZE_M"] * kw["BLOCK_SIZE_K"] + kw["BLOCK_SIZE_K"] * kw["BLOCK_SIZE_N"]
    return config.num_stages * tile_elems * itemsize


def _prune_configs_by_smem(configs, named_args, **kwargs):
    itemsize = named_args["a_ptr"].element_size()
    kept = [c for c in configs if _pipeline_smem_bytes(c, itemsize) <= _SMEM_PIPELINE_BUDGET]
    return kept or [min(configs, key=lambda c: _pipeline_smem_bytes(c, itemsize))]


_PRUNE = {"early_config_prune": _prune_configs_by_smem}


@triton.jit
def _grouped_pid(
    pid, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr
):
    # Optimization 2: grouped ("super-tile") program ordering for L2 reuse. Row-major order
    # walks a whole row of C tiles, so one wave of programs needs few A row panels but every B
    # column panel. Walking column-major inside groups of GROUP_SIZE_M tile rows shrinks the
    # wave's working set. 8192^3 bf16, 128x256 tiles, a wave of 132 programs: row-major touches
    # 5 A panels (2 MB each) + all 32 B panels (4 MB each) = 138 MB, far over the 50 MB L2;
    # grouped by 8 it touches 8 A + 17 B panels = 84 MB, ~40% fewer bytes from HBM. The Triton
    # tutorial measures ~10% from this at large sizes; expect ~0 at 4096^3, where a wave's
    # panels (~40 MB) fit in L2 either way.
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    # The last group may have fewer than GROUP_SIZE_M tile rows.
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


# Optimization 3 (the decorator): autotune over the table above, re-tuned per (M, N, K, dtypes).
@triton.autotune(configs=_CONFIGS, key=["M", "N", "K"], prune_configs_by=_PRUNE)
# Optimization 5: mask-free fast path. EVEN_K is a compile-time flag, so when BLOCK_SIZE_K
# divides K the K loop is compiled with no masks at all: unpredicated, fully vectorized
# 16-byte loads (cp.async without a zero-fill predicate), no compare/select per element per
# iteration. A separate binary is compiled for the ragged case, so that path pays nothing here.
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_SIZE_K"] == 0})
@triton.jit
def _matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    pid_m, pid_n = _grouped_pid(pid, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)

    # Optimization 7: compiler hints. Each tile's row/column offsets are BLOCK_SIZE contiguous
    # integers starting at a multiple of BLOCK_SIZE; stating it lets Triton's alignment
    # analysis prove 16-byte vector loads and coalesced/TMA-friendly shared-memory layouts even
    # where the offset arithmetic hides it. (The analysis infers this for pid * BLOCK + arange on
    # its own, so expect ~0% here; the hint is applied BEFORE the wrap below, where it is true.
    # Some older code puts it after `% M`, which is false on a ragged edge tile.)
    offs_am = tl.max_contiguous(
        tl.multiple_of(pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M), BLOCK_SIZE_M),
        BLOCK_SIZE_M,
    )
    offs_bn = tl.max_contiguous(
        tl.multiple_of(pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N), BLOCK_SIZE_N),
        BLOCK_SIZE_N,
    )
    # Rows/columns past M/N wrap to valid ones (results discarded by the store mask), so the
    # loads need no M/N mask. Triton's axis analysis keeps contiguity gcd(BLOCK, 16) through the
    # `%` when M/N are multiples of 16 (the launcher's integer specialisation), so loads stay
    # vectorized.
    offs_am = offs_am % M
    offs_bn = offs_bn % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)

    # Optimization 6: pointer advancement. The 2-D pointer tiles are built once; each K step
    # adds a scalar (BLOCK_SIZE_K * stride) instead of recomputing
    # base + offs_m * stride_m + offs_k * stride_k per element (two multiplies and adds per
    # element per iteration), which also lets the pipeliner see a simple induction variable.
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    # Optimization 1: tiled tl.dot K loop with an fp32 accumulator. Each program owns a
    # BLOCK_SIZE_M x BLOCK_SIZE_N tile of C in registers and streams K in BLOCK_SIZE_K slabs
    # through the tensor cores (wgmma on Hopper); fp32 accumulation keeps fp16/bf16 results
    # within 1e-2 at K = 8192, rounding once at the end.
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        if EVEN_K:
            # Optimization 5: no mask, no `other`.
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            # Ragged K: zero-fill past K so the padded products add nothing.
            k_remaining = K - k * BLOCK_SIZE_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        if a_ptr.dtype.element_ty == tl.float32:
            # fp32 operands: full IEEE products (no TF32, whose 10-bit mantissa misses 1e-4).
            accumulator = tl.dot(a, b, accumulator, input_precision="ieee")
        else:
            accumulator = tl.dot(a, b, accumulator)
        # Optimization 6: advance the pointers by one K slab.
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


# Optimization 8: Hopper tensor descriptors (TMA), a separate kernel chosen at launch. A TMA
# copy is one instruction per tile issued by one thread: no per-thread address arithmetic or
# predicates, hardware zero-fill out of bounds (so no K/M/N masks at all) and swizzled shared
# memory ready for wgmma. It frees registers and issue slots for the tensor-core pipeline;
# Triton's persistent-matmul tutorial reports ~5-15% over cp.async pointer loads on H100 at
# large bf16 shapes. Same tiles, grouping and pipelining (num_stages) as the pointer kernel.
@triton.autotune(configs=_CONFIGS, key=["M", "N", "K"], prune_configs_by=_PRUNE)
@triton.jit
def _matmul_tma_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # Device-side descriptors over the whole (contiguous, row-major) operands. The launcher
    # guarantees 16-byte aligned bases and row strides (K and N multiples of 8 elements).
    a_desc = tl.make_tensor_descriptor(
        a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K]
    )
    b_desc = tl.make_tensor_descriptor(
        b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_SIZE_K, BLOCK_SIZE_N]
    )
    c_desc = tl.make_tensor_descriptor(
        c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N]
    )

    pid = tl.program_id(axis=0)
    # Optimization 2: grouped program order, as in the pointer kernel.
    pid_m, pid_n = _grouped_pid(pid, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    off_m = pid_m * BLOCK_SIZE_M
    off_n = pid_n * BLOCK_SIZE_N

    # Optimization 1: fp32 accumulator over the K loop; TMA zero-fills the ragged K tail.
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = a_desc.load([off_m, k * BLOCK_SIZE_K])
        b = b_desc.load([k * BLOCK_SIZE_K, off_n])
        accumulator = tl.dot(a, b, accumulator)

    # The TMA store clips rows/columns past M/N itself.
    c_desc.store([off_m, off_n], accumulator.to(c_ptr.dtype.element_ty))


_HAS_TENSOR_DESC = hasattr(tl, "make_tensor_descriptor") and hasattr(triton, "set_allocator")


@functools.cache
def _is_hopper_or_newer(device_index):
    return torch.cuda.get_device_capability(device_index)[0] >= 9


def _use_tma(a, b, c):
    if not _HAS_TENSOR_DESC or os.environ.get("TRITON_INTERPRET", "0") == "1":
        return False
    if a.device.type != "cuda" or torch.version.hip is not None:
        return False
    if a.dtype not in (torch.float16, torch.bfloat16):
        return False
    if not _is_hopper_or_newer(a.device.index if a.device.index is not None else 0):
        return False
    K, N = b.shape
    # TMA needs 16-byte aligned bases and 16-byte multiples for every non-unit stride.
    aligned = all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (a, b, c))
    return aligned and K % 8 == 0 and N % 8 == 0


def matmul(a, b):
    assert a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0], "incompatible shapes"
    assert a.dtype == b.dtype, "incompatible dtypes"
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)

    def grid(meta):
        # 1-D grid; _grouped_pid maps it to (pid_m, pid_n).
        return (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)

    if _use_tma(a, b, c):
        device = a.device

        # Device-side descriptors are written by each program into a global scratch buffer
        # (128 bytes a program) that Triton obtains through this allocator at launch.
        def _alloc(size, alignment, stream):
            return torch.empty(size, device=device, dtype=torch.int8)

        triton.set_allocator(_alloc)
        _matmul_tma_kernel[grid](a, b, c, M, N, K)
    else:
        _matmul_kernel[grid](
            a,
            b,
            c,
            M,
            N,
            K,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            c.stride(0),
            c.stride(1),
        )
    return c


class ModelNew(nn.Module):
    def forward(self, A, B):
        return matmul(A, B)
