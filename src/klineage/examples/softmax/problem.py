"""Row softmax: the bundled example problem (KernelBench format + REGIMES)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


M, N = 4096, 4096

# Small regimes run in about a second in the CPU interpreter; the large ones are for a GPU.
REGIMES = {
    "tiny_rows": dict(M=37, N=33),
    "odd": dict(M=6, N=1023),
    "half": dict(M=16, N=200, dtype=torch.float16),
    "large": dict(M=8192, N=8192, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny_rows", "odd", "half")


def get_inputs(M=M, N=N, dtype=torch.float32):
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return []
