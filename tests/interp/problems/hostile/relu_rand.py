"""Hostile (inputs-beyond-get_inputs): a valid KernelBench ReLU problem whose get_inputs draws only torch.rand (all values in [0, 1)), so relu is the identity on every input it can produce and candidates/hostile/relu_copy.py (a plain copy) matches the reference.
Expect: correctness — the problem itself is valid (it loads); the hardened gate must reject relu_copy.py against it by drawing signed inputs beyond get_inputs.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


batch_size = 16
dim = 16384

REGIMES = {
    "small": dict(batch_size=8, dim=300),
    "odd": dict(batch_size=3, dim=1001),
    "large": dict(batch_size=16, dim=16384),
}
CPU_REGIMES = ("small", "odd")


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
