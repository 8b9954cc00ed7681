"""Column sums of a tall float32 matrix: one reduction over many rows per column, where the
order of the additions decides the last bits, and on cancelling data more than the tolerance.

get_inputs draws rows with a large common offset, added in the first half of the rows and
subtracted in the second: the partial sums reach OFFSET x ROWS / 2 while each column sum is of
order sqrt(ROWS), so float32 rounding in any summation order (PyTorch's included) is above the
1e-4 tolerance on some columns (tests/interp/test_gate_float64.py)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=0)


ROWS, COLS = 16384, 8
OFFSET = 10.0

REGIMES = {
    "tall": dict(ROWS=16384, COLS=8),
    "large": dict(ROWS=1 << 16, COLS=1024),
}
CPU_REGIMES = ("tall",)


def get_inputs(ROWS=ROWS, COLS=COLS):
    x = torch.randn(ROWS, COLS)
    x[: ROWS // 2] += OFFSET
    x[ROWS // 2 :] -= OFFSET
    return [x]


def get_init_inputs():
    return []
