"""SwiGLU's gating product: silu(a) * b over (M, N), as a Llama MLP computes it between its up
and down projections.

The reference computes in fp32 and rounds once. Memory-bound: the floor is reading a and b once
and writing the product once, 3 * M * N * itemsize bytes (4096 x 14336 bf16 = 352 MB, ~83 us
at 4.25 TB/s on an H200).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        af = a.float()
        return (af * torch.sigmoid(af) * b.float()).to(a.dtype)


M, N = 4096, 14336

REGIMES = {
    "tiny": dict(M=5, N=37),  # CPU: ragged rows and columns
    "odd": dict(M=3, N=1000),
    "llama_mlp": dict(M=4096, N=14336, dtype=torch.bfloat16),  # GPU
    "short_rows": dict(M=65536, N=256, dtype=torch.bfloat16),
    "fp32": dict(M=2048, N=8192, dtype=torch.float32),
}
CPU_REGIMES = ("tiny", "odd")


def get_inputs(M=M, N=N, dtype=torch.float32):
    return [torch.randn(M, N).to(dtype), torch.randn(M, N).to(dtype)]


def get_init_inputs():
    return []
