"""Hostile (problem-fault): the reference Model.__init__ raises RuntimeError (not TypeError), so Model(*get_init_inputs()) fails however it is called.
Expect: problem error (exit 2) naming init_raises.py:12 — the reference cannot be built; that is the problem's fault, not the candidate's.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("hostile problem: the reference cannot be constructed")

    def forward(self, x):
        return torch.softmax(x, dim=-1)


REGIMES = {
    "tiny_rows": dict(M=37, N=33),
    "odd": dict(M=6, N=1023),
}
CPU_REGIMES = ("tiny_rows", "odd")


def get_inputs(M=37, N=33, dtype=torch.float32):
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return []
