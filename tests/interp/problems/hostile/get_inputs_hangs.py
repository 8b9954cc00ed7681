"""Hostile (problem-fault): get_inputs never returns (an infinite loop before it builds the tensor).
Expect: problem error (exit 2) naming get_inputs_hangs.py:25 — a timeout inside the problem's get_inputs is the problem's fault, reported as such, not a candidate timeout.

The loop is deliberate and unbounded: it relies on the gate's timeout.
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
    spins = 0
    while True:  # deliberate hang
        spins += 1
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return []
