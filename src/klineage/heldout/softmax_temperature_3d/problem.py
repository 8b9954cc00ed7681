"""Softmax with a temperature over the last dim of a 3-D tensor: y = softmax(x / T), x (B, S, N).

Sampling-time or distillation logits per (batch, position); T is a constructor argument (a
module global the regimes override). The reference computes in fp32 and casts back.
Memory-bound: read x once, write y once, e.g. 8 x 1024 x 8192 bf16 = 128 MiB each way,
~63 us at 4.25 TB/s on an H200.
"""

import torch
import torch.nn as nn

TEMPERATURE = 0.7


class Model(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, x):
        return torch.softmax(x.float() / self.temperature, dim=-1).to(x.dtype)


B, S, N = 8, 1024, 8192

REGIMES = {
    # CPU (interpreter): 10 rows of 33 (block 64), 21 rows of 1000 at T = 2 (block 1024), and
    # fp16 rows of 200 at a sharp T = 0.25.
    "tiny": dict(B=2, S=5, N=33),
    "odd": dict(B=3, S=7, N=1000, TEMPERATURE=2.0),
    "fp16_small": dict(B=4, S=16, N=200, TEMPERATURE=0.25, dtype=torch.float16),
    # GPU (H200), bf16: 64 x 4096 positions of 128 (262144 short rows), and 8 x 1024 positions
    # of 8192.
    "short_rows": dict(B=64, S=4096, N=128, dtype=torch.bfloat16),
    "long_rows": dict(B=8, S=1024, N=8192, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "odd", "fp16_small")


def get_inputs(B=B, S=S, N=N, dtype=torch.float32):
    return [(2.0 * torch.randn(B, S, N)).to(dtype)]


def get_init_inputs():
    return [TEMPERATURE]
