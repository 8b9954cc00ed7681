"""Hostile (problem-fault): a syntax error on line 11 (an unclosed parenthesis in Model.forward).
Expect: problem error (exit 2) naming syntax_error.py:11 — with the line, column and a caret, before anything runs.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1


REGIMES = {"tiny_rows": dict(M=37, N=33)}
CPU_REGIMES = ("tiny_rows",)


def get_inputs(M=37, N=33, dtype=torch.float32):
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return []
