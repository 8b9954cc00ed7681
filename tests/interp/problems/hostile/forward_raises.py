"""Hostile (problem-fault): the reference Model.forward raises (RuntimeError) on every call.
Expect: problem error (exit 2) naming forward_raises.py:12 — the reference, not the candidate, is broken; no candidate may be charged for it.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=-1)
        raise RuntimeError("hostile problem: the reference forward always raises")
        return y


REGIMES = {
    "tiny_rows": dict(M=37, N=33),
    "odd": dict(M=6, N=1023),
}
CPU_REGIMES = ("tiny_rows", "odd")


def get_inputs(M=37, N=33, dtype=torch.float32):
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return []
