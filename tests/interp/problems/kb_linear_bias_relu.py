"""A KernelBench level-2 style problem, unchanged in form: sized by module globals, one of them
computed from another (bias_shape from out_features), no REGIMES. At its own size it is far too
big for the interpreter; --set out_features=... must carry bias_shape along."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear (no bias), plus a bias of shape bias_shape, then ReLU."""

    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(self.linear(x) + self.bias)


batch_size = 1024
in_features = 4096
out_features = 2048
bias_shape = (out_features,)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]
