"""A plain KernelBench-style problem: sized by module globals, no REGIMES (one 'default' regime)."""

import torch
import torch.nn as nn

batch_size = 32768
dim = 4096


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
