"""Fused bias + GELU epilogue: y = gelu_tanh(x + bias[None, :]) for x (M, N) and bias (N,).

The Megatron bias-GELU fusion: the bias add and the tanh-approximated GELU,
0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))) with z = x + bias, computed in fp32 and
rounded once to x's dtype. The reference upcasts both inputs, so it is itself accurate.

Memory-bound: a handful of FLOPs and one exponential per element against 2 * itemsize bytes
moved. The floor is reading x once and writing y once (the bias, at most 512 KB, is
negligible): 2 * M * N * itemsize bytes at the 4.25 TB/s an H200 copies at
(shared/ANCHORS.md). 16384 x 8192 bf16 = 268 MB each way, ~126 us; 1048576 x 256 bf16 =
537 MB each way, ~253 us; 256 x 262144 bf16 = 134 MB each way, ~63 us; 8191 x 4097 fp32 =
134 MB each way, ~63 us. The GPU regimes span the shapes where the expert's tile differs:
short rows (many rows per tile), very long rows (many column blocks per row), a square
middle, and fp32 with neither dimension a multiple of any tile (the masked path at scale).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, bias):
        return F.gelu(x.float() + bias.float(), approximate="tanh").to(x.dtype)


M, N = 16384, 8192

REGIMES = {
    # CPU (interpreter). The expert's tile is 4096 elements, at most 1024 columns wide, and its
    # grid gives each column block 4 programs on the interpreter's one pseudo-SM (expert.py).
    # The naive kernel runs one program per row, 64 columns an iteration, so M stays small.
    # Ragged along both dimensions: 2 row tiles of 32 rows (the second holds 1 row) of a
    # 128-column block that covers 70 columns: the masked path.
    "ragged": dict(M=33, N=70),
    # Both dimensions multiples of the tile (2 row tiles of 32 x 128): the unmasked path; fp16.
    "even_fp16": dict(M=64, N=128, dtype=torch.float16),
    # 3 column blocks of 1024 (the last one 452 wide) x 4 row tiles of 4 rows (the last one
    # 1 row): 2 programs per column block, each walking 2 row tiles with the same bias row.
    "multi_block": dict(M=13, N=2500),
    # GPU (H200).
    # The square middle, 268 MB of x: 8 column blocks of 1024, 4 rows a tile.
    "large": dict(M=16384, N=8192, dtype=torch.bfloat16),
    # Short rows, 537 MB of x: one column block of 256, 16 rows a tile; one program per row
    # would launch a million programs of 512 bytes each.
    "short_rows": dict(M=1048576, N=256, dtype=torch.bfloat16),
    # Few, very long rows, 134 MB of x: 256 column blocks a row.
    "wide": dict(M=256, N=262144, dtype=torch.bfloat16),
    # fp32, neither dimension a multiple of the tile, 134 MB of x: the masked path at scale,
    # and a row stride (4097) that allows no 16-byte vector loads.
    "odd_fp32": dict(M=8191, N=4097, dtype=torch.float32),
}
CPU_REGIMES = ("ragged", "even_fp16", "multi_block")


def get_inputs(M=M, N=N, dtype=torch.float32):
    # x and bias ~N(0, 1): z = x + bias ~N(0, 2), the range where GELU is curved.
    return [torch.randn(M, N).to(dtype), torch.randn(N).to(dtype)]


def get_init_inputs():
    return []
