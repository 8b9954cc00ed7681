"""Hostile (problem-fault): the reference output is all NaN, so a checker that treats matching NaNs as equal accepts a candidate that writes nothing (candidates/hostile/writes_nothing.py).
Expect: problem error (exit 2) naming nan_reference.py:11 — a reference whose output is entirely non-finite on get_inputs cannot judge anything.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.full_like(x, float("nan"))


REGIMES = {
    "tiny_rows": dict(M=37, N=33),
    "odd": dict(M=6, N=1023),
    "half": dict(M=16, N=200, dtype=torch.float16),
}
CPU_REGIMES = ("tiny_rows", "odd", "half")


def get_inputs(M=37, N=33, dtype=torch.float32):
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return []
