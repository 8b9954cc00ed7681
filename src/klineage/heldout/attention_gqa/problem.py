"""Causal grouped-query attention: q has H heads, k and v have H / 4, and query head h reads
key/value head h // 4 (each group of 4 consecutive query heads shares one KV head).

q, out: (B, H, L, D); k, v: (B, H / 4, L, D); fp16/bf16, scale 1/sqrt(D). Compute-bound at the
GPU shapes: 2 * B * H * L^2 * D causal FLOPs (137 GFLOP for B16 H32 L1024 D128, ~0.20 ms at the
H200's measured 680 TFLOP/s; 275 GFLOP for B2 H32 L4096, ~0.40 ms). K/V bytes are a quarter of
multi-head attention's, and the 4 query heads of a group reread the same K/V tiles, which L2
(or a kernel that processes the group together) can serve.

The reference expands k and v to H heads and runs SDPA in the input dtype (flash attention on
the GPU), accurate to well within the fp16/bf16 tolerance.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# Query heads per KV head.
GROUP = 4


class Model(nn.Module):
    def forward(self, q, k, v):
        group = q.shape[1] // k.shape[1]
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


B, H, L, D = 16, 32, 1024, 128

REGIMES = {
    # CPU (interpreter), fp16. One KV head for 4 query heads; L = 77 ragged in every block.
    "cpu_h4_l77": dict(B=1, H=4, L=77, D=64, dtype=torch.float16),
    # Two KV heads (query heads 4..7 must read KV head 1), D = 32, L = 40 shorter than a block.
    "cpu_h8_l40_d32": dict(B=1, H=8, L=40, D=32, dtype=torch.float16),
    # Two batches, aligned L = 64: full blocks, batch offsets into the KV tensors.
    "cpu_b2_h4_l64": dict(B=2, H=4, L=64, D=64, dtype=torch.float16),
    # GPU (H200), bf16, D = 128 (8 KV heads). Batched prompts of 1024 tokens.
    "batch_l1024": dict(B=16, H=32, L=1024, D=128, dtype=torch.bfloat16),
    # Long prompts: 4096 tokens, 2 sequences; the causal half of the key blocks is large.
    "long_l4096": dict(B=2, H=32, L=4096, D=128, dtype=torch.bfloat16),
}
CPU_REGIMES = ("cpu_h4_l77", "cpu_h8_l40_d32", "cpu_b2_h4_l64")


def get_inputs(B=B, H=H, L=L, D=D, dtype=torch.bfloat16):
    h_kv = H // GROUP
    q = torch.randn(B, H, L, D, dtype=dtype)
    k = torch.randn(B, h_kv, L, D, dtype=dtype)
    v = torch.randn(B, h_kv, L, D, dtype=dtype)
    return [q, k, v]


def get_init_inputs():
    return []


def flop_count(q, k, v):
    # Causal: half of the 4 * L^2 * D per query head.
    b, h, l, d = q.shape
    return 2.0 * b * h * l * l * d
