"""Hostile (problem-fault): calls os._exit(3) while being imported (no exception, no traceback, no cleanup).
Expect: problem error (exit 2) naming exit_at_import.py:10 — the problem's import killed its process; that is the problem's fault, never a candidate's.
"""

import os

import torch
import torch.nn as nn

os._exit(3)


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


REGIMES = {"tiny_rows": dict(M=37, N=33)}
CPU_REGIMES = ("tiny_rows",)


def get_inputs(M=37, N=33, dtype=torch.float32):
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return []
