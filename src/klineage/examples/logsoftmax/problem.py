"""Row log-softmax: a held-out problem (not in the corpus) for skill retrieval."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.log_softmax(x.float(), dim=-1).to(x.dtype)


M, N = 4096, 8192

REGIMES = {
    "tiny": dict(M=37, N=33),
    "odd": dict(M=6, N=1023),
    # GPU: many short rows, where packing rows into one program pays; and long rows, where not.
    "short_rows": dict(M=262144, N=96, dtype=torch.bfloat16),
    "long_rows": dict(M=4096, N=8192, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "odd")


def get_inputs(M=M, N=N, dtype=torch.float32):
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return []
