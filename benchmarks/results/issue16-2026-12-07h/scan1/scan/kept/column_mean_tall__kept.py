"""Column means of x (M, N), the first Triton version: one program per column.

The program walks down its column 16 rows at a time (a strided gather, one element per row),
adds each step's 16 values into one fp32 running total, and divides by M at the end. Default
launch settings. Correct at any shape; slow when columns are long and few: each load uses 2-4
bytes of a 32-byte sector, and N programs (768 for 132 SMs) each make M / 16 dependent steps.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_down_column(src, dst, n_rows, row_pitch, STEP: tl.constexpr, n_cols, BLOCK_N: tl.constexpr, n_out):
    # split_k: program (i, s) reduces chunk s of n_rows (a multiple of STEP) into row s of
    # the fp32 partials at dst, which a second kernel adds up
    split = tl.program_id(1)
    dst += split.to(tl.int64) * n_out
    k_chunk = tl.cdiv(tl.cdiv(n_rows, tl.num_programs(1)), STEP) * STEP
    k_lo = split * k_chunk
    cols = (tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]
    col_ok = cols < n_cols
    c = cols
    total = tl.full((1, BLOCK_N), 0.0, tl.float32)
    # tile_accumulator: total's sum of each step kept per element of the [STEP, BLOCK_N] tile, reduced once after the loop
    total_tile = tl.full((STEP, BLOCK_N), 0.0, tl.float32)
    for top in tl.range(k_lo, tl.minimum(k_lo + k_chunk, n_rows), STEP, num_stages=2):
        r = top + tl.arange(0, STEP)[:, None]
        vals = tl.load(src + r.to(tl.int64) * row_pitch + c, mask=(r < n_rows) & col_ok, other=0.0)
        total_tile += vals.to(tl.float32)
    total += tl.sum(total_tile, axis=0, keep_dims=True)
    tl.store(dst + c, total / n_rows, mask=col_ok)


@triton.jit
def _split_k_sum(parts_ptr, out_ptr, n_out, n_split, BLOCK: tl.constexpr, PARTS: tl.constexpr):
    """out[i] = the sum over s of parts[s, i] in fp32, cast to out's dtype (split_k's second
    kernel: the SPLIT partials of each output, PARTS rows a step, in a fixed order)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n_out
    rows = tl.arange(0, PARTS)[:, None]
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    # tile_accumulator: total's sum of each step kept per element of the [PARTS, BLOCK] tile, reduced once after the loop
    total_tile = tl.full((PARTS, BLOCK), 0.0, tl.float32)
    for s0 in tl.range(0, n_split, PARTS, num_stages=2):
        s = s0 + rows
        at = parts_ptr + s.to(tl.int64) * n_out + offs[None, :]
        total_tile += tl.load(at, mask=(s < n_split) & ok[None, :], other=0.0)
    total += tl.sum(total_tile, axis=0)
    tl.store(out_ptr + offs, total.to(out_ptr.dtype.element_ty), mask=ok)


class _ModelNewBase(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty(n_cols, dtype=x.dtype, device=x.device)
        # column_tiling: a [rows, BLOCK_N] tile of about 4096 elements, at most 256 columns; loads coalesced along the columns
        BLOCK_N = min(256, max(1, 4096 // 16), triton.next_power_of_2(n_cols))
        # split_k: SPLIT programs per output, each reducing a chunk of n_rows in fp32 into
        # out_parts[s]; _split_k_sum adds the SPLIT partials in order and casts to out's dtype.
        # SPLIT: programs for about 4x the 132 SMs of an H200, at most 512 chunks, at least one
        # step each.
        SPLIT = max(1, min(512, triton.cdiv(4 * 132, triton.cdiv(n_cols, BLOCK_N)), triton.cdiv(n_rows, 16)))
        out_parts = torch.empty((SPLIT, out.numel()), device=out.device, dtype=torch.float32)
        mean_down_column[(triton.cdiv(n_cols, BLOCK_N), SPLIT)](x, out_parts, n_rows, x.stride(0), STEP=16, n_cols=n_cols, BLOCK_N=BLOCK_N, n_out=out.numel())
        _split_k_sum[(triton.cdiv(out.numel(), 256),)](out_parts, out, out.numel(), SPLIT, BLOCK=256, PARTS=min(16, triton.next_power_of_2(SPLIT)))
        return out


class _ModelNewAlternative(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty(n_cols, dtype=x.dtype, device=x.device)
        # column_tiling: a [rows, BLOCK_N] tile of about 4096 elements, at most 256 columns; loads coalesced along the columns
        BLOCK_N = min(256, max(1, 4096 // 16), triton.next_power_of_2(n_cols))
        # split_k: SPLIT programs per output, each reducing a chunk of n_rows in fp32 into
        # out_parts[s]; _split_k_sum adds the SPLIT partials in order and casts to out's dtype.
        # SPLIT: programs for about 1056 in all, at most 1024 chunks, at least one step each.
        SPLIT = max(1, min(1024, triton.cdiv(1056, triton.cdiv(n_cols, BLOCK_N)), triton.cdiv(n_rows, 16)))
        out_parts = torch.empty((SPLIT, out.numel()), device=out.device, dtype=torch.float32)
        mean_down_column[(triton.cdiv(n_cols, BLOCK_N), SPLIT)](x, out_parts, n_rows, x.stride(0), STEP=16, n_cols=n_cols, BLOCK_N=BLOCK_N, n_out=out.numel())
        _split_k_sum[(triton.cdiv(out.numel(), 256),)](out_parts, out, out.numel(), SPLIT, BLOCK=256, PARTS=min(16, triton.next_power_of_2(SPLIT)))
        return out


class ModelNew(_ModelNewBase):
    """Regime dispatch (klineage): the alternative where input 0's last dimension >= 444; measured
    faster there (tall_fp32_gpu 1.13x, wide_fp32_gpu 1.18x), side by side with the other path.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        alternative = _ModelNewAlternative(*args, **kwargs)
        alternative.load_state_dict(self.state_dict())  # the same parameters on both paths
        self.alternative = alternative

    def forward(self, *inputs):
        tensors = [v for v in inputs if hasattr(v, "shape") and hasattr(v, "numel")]
        if tensors[0].shape[-1] >= 444:
            return self.alternative(*inputs)
        return super().forward(*inputs)
