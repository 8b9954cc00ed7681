"""Hostile (problem-fault): get_inputs raises ValueError for every regime.
Expect: problem error (exit 2) naming get_inputs_valueerror.py:23 — the problem cannot produce inputs; no candidate may be charged for it.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


REGIMES = {
    "tiny_rows": dict(M=37, N=33),
    "odd": dict(M=6, N=1023),
}
CPU_REGIMES = ("tiny_rows", "odd")


def get_inputs(M=37, N=33, dtype=torch.float32):
    if M > 0:
        raise ValueError(f"hostile problem: no inputs for M={M}, N={N}")
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return []
