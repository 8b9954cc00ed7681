"""Scaled dot-product attention forward, softmax(q k^T / sqrt(D)) v, causal or not.

q, k, v: (B, H, L, D), fp16/bf16; out has the same shape and dtype. sm_scale = 1/sqrt(D).
`causal` is a constructor argument (get_init_inputs returns the module global CAUSAL, which
the regimes override), so Model and ModelNew are built per regime.

Compute-bound: 4 * B * H * L^2 * D FLOPs (two matmuls of 2 * L^2 * D each per head), halved
for causal. B4 H32 L4096 D128 causal is 275 GFLOP, ~0.40 ms at the H200's measured 680
TFLOP/s (cuBLAS bf16); SDPA (flash) reaches 78% of that floor and torch eager 3%
(shared/ANCHORS.md). The regimes span what the expert's tricks pay for: long causal rows
(block skipping halves the work), long non-causal rows (no skipping to gain), the smaller head
dim (D=64: half the FLOPs per byte of K/V, other tile shapes) and short sequences (few key
blocks per program, many programs).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# Overridden by the regimes (a module global, docs/FORMAT.md). Default True: a caller of
# flop_count outside a regime gets the causal (halved) count, the lower floor, never one that
# would make a correct kernel look faster than physics allows.
CAUSAL = True


class Model(nn.Module):
    def __init__(self, causal):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        # The reference computes in fp32 and rounds once, so it is itself accurate to well
        # within the bf16/fp16 tolerance (a half-precision SDPA would round P before P @ V).
        out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=self.causal)
        return out.to(q.dtype)


B, H, L, D = 4, 32, 4096, 128

REGIMES = {
    # CPU (interpreter), fp16 (bf16 is broken there, shared/TRITON_CPU.md). The first three
    # lengths are odd, so no block size of the expert's table (32..128) divides them: the last
    # query block and the last key block are ragged in every config.
    # L=131 > 128: with BLOCK_M=128 the second query block (3 real rows) runs the unmasked
    # off-diagonal loop over keys [0, 128) and then a ragged diagonal block; with BLOCK_M=64
    # there are 3 query blocks, the last with 3 real rows.
    "cpu_causal": dict(B=1, H=2, L=131, D=64, dtype=torch.float16, CAUSAL=True),
    # Non-causal: full key blocks without masks, then one masked ragged tail block.
    "cpu_noncausal": dict(B=1, H=2, L=77, D=64, dtype=torch.float16, CAUSAL=False),
    # L=45 is shorter than every BLOCK_N: no full key block at all, only the masked tail/diagonal;
    # D=128 checks the large-head-dim path once.
    "cpu_causal_d128_short": dict(B=1, H=1, L=45, D=128, dtype=torch.float16, CAUSAL=True),
    # Lengths that blocks divide compile the branches without masks that the GPU regimes use
    # (expert optimization 6), so they are checked here too. L=256: every block divides it.
    "cpu_causal_aligned": dict(B=1, H=1, L=256, D=64, dtype=torch.float16, CAUSAL=True),
    # L=192: divided by BLOCK_N 32/64 and BLOCK_M 64, not by 128, so each config mixes
    # unmasked key loads with masked query rows (causal: the diagonal stops at N_CTX unmasked).
    "cpu_causal_mixed": dict(B=1, H=1, L=192, D=64, dtype=torch.float16, CAUSAL=True),
    "cpu_noncausal_mixed_d128": dict(B=1, H=1, L=192, D=128, dtype=torch.float16, CAUSAL=False),
    # GPU (H200), bf16.
    # The anchor shape: SDPA flash 78% of the floor; the expert's target is >= 85% of SDPA.
    "causal_d128": dict(B=4, H=32, L=4096, D=128, dtype=torch.bfloat16, CAUSAL=True),
    # Same shape without the mask: block skipping buys nothing, every tile is a full tile.
    "noncausal_d128": dict(B=4, H=32, L=4096, D=128, dtype=torch.bfloat16, CAUSAL=False),
    # D=64: half the FLOPs per K/V byte, smaller tiles fit more stages; other best config.
    "causal_d64": dict(B=4, H=32, L=4096, D=64, dtype=torch.bfloat16, CAUSAL=True),
    # Short sequences: 4-8 query blocks per head, the diagonal is a large share of the work
    # and the masked diagonal loop dominates; 512 (b, h) pairs keep the grid full.
    "short_d64": dict(B=32, H=16, L=512, D=64, dtype=torch.bfloat16, CAUSAL=True),
}
CPU_REGIMES = (
    "cpu_causal",
    "cpu_noncausal",
    "cpu_causal_d128_short",
    "cpu_causal_aligned",
    "cpu_causal_mixed",
    "cpu_noncausal_mixed_d128",
)


def get_inputs(B=B, H=H, L=L, D=D, dtype=torch.bfloat16):
    # randn q, k: the logits q.k/sqrt(D) are ~N(0, 1), a realistic spread for trained models.
    q = torch.randn(B, H, L, D).to(dtype)
    k = torch.randn(B, H, L, D).to(dtype)
    v = torch.randn(B, H, L, D).to(dtype)
    return [q, k, v]


def get_init_inputs():
    return [CAUSAL]


def flop_count(q, k, v):
    # CAUSAL is read at call time, i.e. the regime's value while the regime's overrides apply.
    b, h, l, d = q.shape
    flops = 4.0 * b * h * l * l * d
    return flops / 2 if CAUSAL else flops
