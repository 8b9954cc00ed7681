"""Causal attention over short sequences with head dim 128: softmax(mask(q k^T / sqrt(128))) v.

q, k, v, out: (B, H, L, 128), fp16/bf16, L <= 256 and B * H in the thousands (a batch of short
prompts). At these lengths the 2 * B * H * L^2 * D causal FLOPs (17 GFLOP at L = 256, ~25 us
at the H200's measured 680 TFLOP/s) are below the cost of moving Q, K, V and O once (268 MB,
~63 us at 4.25 TB/s), so it is memory-bound; masked tiles above the diagonal are a large share
of the work because each head has only a few key blocks.

The reference is SDPA in the input dtype (flash attention on the GPU), accurate to well within
the fp16/bf16 tolerance, so eager is the library kernel.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


B, H, L = 32, 32, 256
D = 128

REGIMES = {
    # CPU (interpreter), fp16. L = 77: the last query block and the last key block are ragged,
    # and the diagonal crosses a key-block boundary inside a query block.
    "cpu_l77": dict(B=1, H=2, L=77, dtype=torch.float16),
    # L = 128: blocks divide it exactly.
    "cpu_l128_aligned": dict(B=1, H=1, L=128, dtype=torch.float16),
    # Two batches, L = 33: one key past a 32-key block, less than one query block.
    "cpu_b2_l33": dict(B=2, H=1, L=33, dtype=torch.float16),
    # GPU (H200), bf16. L = 256 over 1024 heads.
    "l256_bh1024": dict(B=32, H=32, L=256, dtype=torch.bfloat16),
    # L = 96 (not a power of two: ragged last blocks at scale) over 4096 heads.
    "l96_bh4096": dict(B=128, H=32, L=96, dtype=torch.bfloat16),
}
CPU_REGIMES = ("cpu_l77", "cpu_l128_aligned", "cpu_b2_l33")


def get_inputs(B=B, H=H, L=L, dtype=torch.bfloat16):
    q = torch.randn(B, H, L, D, dtype=dtype)
    k = torch.randn(B, H, L, D, dtype=dtype)
    v = torch.randn(B, H, L, D, dtype=dtype)
    return [q, k, v]


def get_init_inputs():
    return []


def flop_count(q, k, v):
    # Causal: half of the 4 * L^2 * D per head.
    b, h, l, d = q.shape
    return 2.0 * b * h * l * l * d
