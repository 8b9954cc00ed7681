"""Non-causal scaled dot-product attention with a small head dim: softmax(q k^T / sqrt(32)) v.

q, k, v, out: (B, H, L, 32), fp16/bf16. Work is 4 * B * H * L^2 * D FLOPs; at L = 4096 that is
137 GFLOP (~0.20 ms at the H200's measured 680 TFLOP/s), compute-bound, though a 32-deep QK^T
and a 32-wide PV give the tensor cores thin tiles and leave the softmax's exp/max/sum a large
share of the time. At L = 512 with 1024 heads the 134 MB of Q/K/V/O (~32 us at 4.25 TB/s) and
the 34 GFLOP (~50 us) are close: short rows, many programs.

The reference is SDPA in the input dtype (flash attention on the GPU), accurate to well within
the fp16/bf16 tolerance, so eager is the library kernel.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


B, H, L, D = 4, 16, 4096, 32

REGIMES = {
    # CPU (interpreter), fp16. L = 77: no 64-row query block or 64-key block divides it.
    "cpu_l77": dict(B=1, H=2, L=77, dtype=torch.float16),
    # L = 128: every block full, no ragged tail.
    "cpu_l128_aligned": dict(B=1, H=1, L=128, dtype=torch.float16),
    # Two batches, L = 20: shorter than one block, only the masked tail exists.
    "cpu_b2_l20": dict(B=2, H=1, L=20, dtype=torch.float16),
    # GPU (H200), bf16. Long sequences: 64 heads x 64 query blocks, compute-bound.
    "long_l4096": dict(B=4, H=16, L=4096, dtype=torch.bfloat16),
    # Short sequences, many heads: 8 query blocks per head, 8192 programs.
    "short_l512": dict(B=64, H=16, L=512, dtype=torch.bfloat16),
}
CPU_REGIMES = ("cpu_l77", "cpu_l128_aligned", "cpu_b2_l20")


def get_inputs(B=B, H=H, L=L, D=D, dtype=torch.bfloat16):
    q = torch.randn(B, H, L, D, dtype=dtype)
    k = torch.randn(B, H, L, D, dtype=dtype)
    v = torch.randn(B, H, L, D, dtype=dtype)
    return [q, k, v]


def get_init_inputs():
    return []


def flop_count(q, k, v):
    b, h, l, d = q.shape
    return 4.0 * b * h * l * l * d
