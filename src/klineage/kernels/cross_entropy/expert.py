"""Cross-entropy forward (mean, ignore_index=-100) over a large vocabulary: expert version.

Two launches:
  1. `_cross_entropy_row_kernel`: one program per row streams the row's V logits ONCE with an
     online log-sum-exp (running max and running sum, rescaled when the max grows) and writes
     that row's loss (0 for an ignored row) to a fp32 buffer.
  2. `_cross_entropy_mean_kernel`: one program sums the B per-row losses and counts the
     non-ignored rows, then writes loss_sum / count into the 0-dim fp32 output. Deterministic
     (fixed reduction order), unlike an atomic_add into a scalar.

The floor is the logits read once: 8192 x 128256 bf16 = 2.1 GB, ~0.49 ms at 4.25 TB/s on an
H200. torch eager reaches 7% of it (upcast copy, log_softmax materialised, then gather/mean)
and torch.compile 37%.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

IGNORE_INDEX = -100

# log2(e) and ln(2): exp(x) = exp2(x * log2(e)) and ln(s) = log2(s) * ln(2).
_LOG2E = tl.constexpr(1.4426950408889634)
_LN2 = tl.constexpr(0.6931471805599453)


@triton.autotune(
    # Streaming configs (optimization 6). Each loop iteration loads one BLOCK_V chunk; 4096-16384
    # elements (8-32 KB of bf16) per chunk and 8-16 warps give every thread 16-32 elements, i.e.
    # 2-4 16-byte vector loads in flight per thread (ld.global...evict_first.v4 in the PTX), and
    # a 512-thread CTA still leaves room for 3-4 CTAs per SM: ~30+ KB in flight per SM, what
    # Little's law asks of the H200 (4.8 TB/s x ~0.8 us / 132 SMs). Larger chunks also amortise the two block reductions (max, sum) per
    # iteration over more elements. Smaller chunks (1024, 4 warps) leave the loop latency-bound.
    # Keyed on V only: the work per program depends on V, the number of programs on B.
    configs=[
        triton.Config({"BLOCK_V": 4096}, num_warps=8),
        triton.Config({"BLOCK_V": 8192}, num_warps=8),
        triton.Config({"BLOCK_V": 8192}, num_warps=16),
        triton.Config({"BLOCK_V": 16384}, num_warps=16),
    ],
    key=["V"],
)
@triton.jit
def _cross_entropy_row_kernel(
    logits_ptr,
    targets_ptr,
    losses_ptr,
    stride_row,
    V,
    ignore_index,
    BLOCK_V: tl.constexpr,
):
    # int64 row offset: B * V reaches 1e9 at 8192 x 128256 and overflows int32 beyond 2^31.
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * stride_row

    # Optimization 4: the target logit is ONE scalar load at its index, not found by comparing
    # every column with the target inside the vocabulary loop (which costs a compare+select+sum
    # per element, i.e. another block reduction per chunk).
    target = tl.load(targets_ptr + row)
    valid = target != ignore_index
    # Masked so an ignored row (target -100) never reads before the row start.
    x_target = tl.load(row_ptr + target, mask=valid, other=0.0).to(tl.float32)

    # Optimization 1: online log-sum-exp in ONE pass over the vocabulary. m is the running max
    # and s the running sum of exp(x - m); when a chunk raises the max, s is rescaled by
    # exp(m_old - m_new). The row is read once instead of twice (max pass, then sum pass):
    # half the HBM traffic of the two-pass version at V = 128256 (256 KB of bf16 per row does
    # not stay in L1/L2 between passes with thousands of rows in flight).
    # Optimization 2: exp2/log2 with log2(e) prescaling. exp(x - m) = exp2(x*log2(e) - m*log2(e)):
    # with the scalar m*log2(e) computed once per chunk, each element costs ONE FFMA plus one
    # MUFU.EX2. tl.exp on fp32 is lowered to (x - m) -> multiply by log2(e) -> ex2.approx, one
    # more FP32 instruction per element. At 1G elements per call (8192 x 128256) the MUFU alone
    # is ~0.25 ms of the 0.49 ms floor, so the per-element instruction count matters.
    m = float("-inf")
    s = 0.0
    cols = tl.arange(0, BLOCK_V)
    for start in range(0, V, BLOCK_V):
        offs = start + cols
        # Optimization 6: evict_first, the logits are streamed exactly once; keep them from
        # pushing the targets and per-row losses (and other rows' lines) out of L2.
        # Optimization 3: upcast to fp32 right after the load: the max, the exp2 and the sum
        # over 128k terms are fp32 even for bf16/fp16 logits (a bf16 sum of 128k terms would
        # lose everything past the 8th bit).
        x = tl.load(
            row_ptr + offs, mask=offs < V, other=float("-inf"), eviction_policy="evict_first"
        ).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        m_new_log2 = m_new * _LOG2E
        # Rescale the old sum to the new max (first iteration: m = -inf, the factor is
        # exp2(-inf) = 0 and s stays 0); masked lanes hold -inf and add exp2(-inf) = 0.
        s = s * tl.exp2((m - m_new) * _LOG2E) + tl.sum(tl.exp2(x * _LOG2E - m_new_log2), axis=0)
        m = m_new

    # lse = ln(sum exp(x)) = m + ln(s) = m + log2(s) * ln(2).
    lse = m + tl.log2(s) * _LN2
    loss = tl.where(valid, lse - x_target, 0.0)
    tl.store(losses_ptr + row, loss)


@triton.jit
def _cross_entropy_mean_kernel(
    losses_ptr,
    targets_ptr,
    out_ptr,
    B,
    ignore_index,
    BLOCK_B: tl.constexpr,
):
    # Optimization 5: the mean over non-ignored rows in Triton, deterministically: one program,
    # elementwise fp32 accumulators over fixed BLOCK_B slices, then one tree reduction. The
    # count of non-ignored rows comes from the targets (8 bytes a row, 64 KB at B = 8192:
    # negligible next to the 2 GB of logits), so the row kernel writes one value per row.
    # An atomic_add per row into a scalar would be one launch fewer but its fp32 sum would
    # depend on the arrival order of 8192 programs (non-deterministic in the last bits).
    offs = tl.arange(0, BLOCK_B)
    acc_loss = tl.zeros([BLOCK_B], dtype=tl.float32)
    acc_count = tl.zeros([BLOCK_B], dtype=tl.float32)
    for start in range(0, B, BLOCK_B):
        idx = start + offs
        in_range = idx < B
        target = tl.load(targets_ptr + idx, mask=in_range, other=ignore_index)
        loss = tl.load(losses_ptr + idx, mask=in_range, other=0.0)
        keep = target != ignore_index
        acc_loss += tl.where(keep, loss, 0.0)
        acc_count += keep.to(tl.float32)
    # All rows ignored gives 0/0 = nan, as torch does.
    tl.store(out_ptr, tl.sum(acc_loss, axis=0) / tl.sum(acc_count, axis=0))


def cross_entropy_forward(logits, targets, ignore_index=IGNORE_INDEX):
    logits = logits.contiguous()
    targets = targets.contiguous()
    B, V = logits.shape
    losses = torch.empty(B, dtype=torch.float32, device=logits.device)
    out = torch.empty((), dtype=torch.float32, device=logits.device)
    # One program per row: B = 1024..8192 rows give 8-60 programs per SM on 132 SMs, enough
    # to fill the machine without splitting a row across programs.
    _cross_entropy_row_kernel[(B,)](logits, targets, losses, logits.stride(0), V, ignore_index)
    # 1024-row slices: B = 8192 takes 8 iterations of one 4-warp program (~100 KB read).
    _cross_entropy_mean_kernel[(1,)](losses, targets, out, B, ignore_index, BLOCK_B=1024)
    return out


class ModelNew(nn.Module):
    def forward(self, logits, targets):
        return cross_entropy_forward(logits, targets)
