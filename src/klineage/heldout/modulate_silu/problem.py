"""Modulate then SiLU: y = silu(x * (1 + scale[None, :]) + shift[None, :]), x (M, N).

The adaptive-norm modulation of diffusion transformers (a per-channel scale and shift from the
conditioning, then the activation), computed in fp32 and rounded once to x's dtype; the
reference upcasts, so it is itself accurate. Memory-bound: a few FLOPs and one exponential per
element against 2 * itemsize bytes moved. The floor is reading x once and writing y once (scale
and shift, N values each, are negligible): 16384 x 8192 bf16 = 268 MB each way, ~126 us at the
4.25 TB/s an H200 copies at; 1048576 x 128 bf16 = 268 MB each way, ~126 us; 8191 x 4097 fp32 =
134 MB each way, ~63 us.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, scale, shift):
        z = x.float() * (1.0 + scale.float()) + shift.float()
        return F.silu(z).to(x.dtype)


M, N = 16384, 8192

REGIMES = {
    # CPU (interpreter). The naive kernel is one flat walk over M * N elements in blocks of
    # 128, each element finding its channel by `% N`, so the shapes stay small.
    # Ragged: no block divides M * N = 2310, and N = 70 splits blocks mid-row.
    "cpu_ragged": dict(M=33, N=70),
    # fp16, M * N = 8192: whole blocks, rows of 128.
    "cpu_fp16": dict(M=64, N=128, dtype=torch.float16),
    # One long row past several blocks, and a 3-row tail.
    "cpu_long_row": dict(M=3, N=1500),
    # GPU (H200), bf16. A transformer's hidden states: 16384 tokens x 8192 channels.
    "tokens_8192": dict(M=16384, N=8192, dtype=torch.bfloat16),
    # Many short rows (a conv feature map's pixels x 128 channels): the same bytes.
    "pixels_128": dict(M=1048576, N=128, dtype=torch.bfloat16),
    # fp32, odd sizes: no 16-byte alignment of rows, no block divides anything.
    "odd_fp32": dict(M=8191, N=4097, dtype=torch.float32),
}
CPU_REGIMES = ("cpu_ragged", "cpu_fp16", "cpu_long_row")


def get_inputs(M=M, N=N, dtype=torch.float32):
    # scale and shift small, as a modulation's are; z ~ N(0, ~1), where SiLU is curved.
    x = torch.randn(M, N).to(dtype)
    scale = (0.1 * torch.randn(N)).to(dtype)
    shift = (0.1 * torch.randn(N)).to(dtype)
    return [x, scale, shift]


def get_init_inputs():
    return []
