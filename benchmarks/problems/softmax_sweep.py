"""Row-wise softmax (the corpus softmax problem) over a sweep of row lengths, 16 to 16384.

Every GPU regime moves the same bytes (16M bf16 elements in, 16M out: 64 MB, several times the
H200's 60 MB L2), so only the row length changes between them: where several rows per
program pays (short rows) and where it stops paying is the "when" this sweep measures
(benchmarks/measurement_h200.py). The CPU regimes are the corpus problem's small ones.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.dtype in (torch.float16, torch.bfloat16):
            return torch.softmax(x.float(), dim=-1).to(x.dtype)
        return torch.softmax(x, dim=-1)


M, N = 8192, 8192
ELEMENTS = 1 << 24

REGIMES = {
    "tiny_rows": dict(M=37, N=33),
    "odd": dict(M=6, N=1023),
    **{
        f"n{n}": dict(M=ELEMENTS // n, N=n, dtype=torch.bfloat16)
        for n in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
    },
}
CPU_REGIMES = ("tiny_rows", "odd")


def get_inputs(M=M, N=N, dtype=torch.float32):
    return [(torch.randn(M, N) * 3.0).to(dtype)]


def get_init_inputs():
    return []
