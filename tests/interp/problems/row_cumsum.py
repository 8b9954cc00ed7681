"""Prefix sums along long float32 rows: each output is a reduction of up to COLS terms, where
the order of the additions decides the last bits, and on cancelling data more than the tolerance.

get_inputs draws rows with a large common offset, added in the first half of each row and
subtracted in the second: the running sums reach OFFSET x COLS / 2 and come back to order
sqrt(COLS), so the rounding at the peak (PyTorch's included: on the CPU it accumulates in float64
and rounds once) is above the 1e-4 tolerance near the row's end
(tests/interp/test_gate_float64.py)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=-1)


ROWS, COLS = 8, 16384
OFFSET = 10.0

REGIMES = {
    "long": dict(ROWS=8, COLS=16384),
    "large": dict(ROWS=512, COLS=1 << 16),
}
CPU_REGIMES = ("long",)


def get_inputs(ROWS=ROWS, COLS=COLS):
    x = torch.randn(ROWS, COLS)
    x[:, : COLS // 2] += OFFSET
    x[:, COLS // 2 :] -= OFFSET
    return [x]


def get_init_inputs():
    return []
