"""A problem whose get_inputs returns a string among its inputs (a loading error)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(4, 8), "not a tensor"]


def get_init_inputs():
    return []
