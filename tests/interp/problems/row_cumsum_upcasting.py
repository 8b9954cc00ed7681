"""Prefix sums of cancelling float32 rows (row_cumsum.py's data), written as a reference for half
inputs is: upcast, scan, cast back (as src/klineage/heldout/reverse_cumsum_rows/problem.py). Given
float64 inputs, its `x.float()` took the reference's float64 evaluation down to float32, where it
was PyTorch's own result again; gate/upcast.py undoes such casts (tests/interp/test_gate_float64.py).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x.float(), dim=-1).to(x.dtype)


REGIMES = {"long": dict(ROWS=8, COLS=16384)}
CPU_REGIMES = ("long",)


def get_inputs(ROWS=8, COLS=16384):
    x = torch.randn(ROWS, COLS)  # a common offset up the first half of the row, down the second
    x[:, : COLS // 2] += 10.0
    x[:, COLS // 2 :] -= 10.0
    return [x]


def get_init_inputs():
    return []
