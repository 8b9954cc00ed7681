"""RMSNorm forward: y = x / sqrt(mean(x^2, -1) + eps) * weight, over rows of x (M, N).

The Llama / Mistral normalisation. The reference computes in fp32 and casts back to x's dtype;
the weight is an fp32 parameter of the model (random, so a kernel that drops it fails).
Memory-bound: the floor is reading x once and writing y once (plus the weight, N values),
e.g. 16384 x 4096 bf16 = 128 MiB read + 128 MiB written, ~63 us at 4.25 TB/s on an H200.
"""

import torch
import torch.nn as nn

EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden_size, eps=EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x):
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * rstd * self.weight.float()).to(x.dtype)


# N is the hidden size, a constructor argument: regimes override this module global, which
# both get_init_inputs (the weight's length) and get_inputs (the row length) read.
M = 16384
N = 4096

REGIMES = {
    # CPU (interpreter): tiny and odd, non-power-of-two rows (one partial row block); fp16 over
    # nine 8-row programs, the last one partial; long_row exceeds the expert's single-pass limit
    # (MAX_FUSED_N = 8192 elements), so its looped two-pass variant runs, with a partial chunk.
    "tiny": dict(M=37, N=33),
    "odd": dict(M=6, N=1023),
    "fp16_small": dict(M=67, N=768, dtype=torch.float16),
    "long_row": dict(M=3, N=9000),
    # GPU: the Llama hidden size (the anchor: Liger 58%, a simple one-block kernel 89% of the
    # floor), many short rows (rows per program matter), long rows (looped variant) and fp32.
    "llama": dict(M=16384, N=4096, dtype=torch.bfloat16),
    "short_rows": dict(M=262144, N=128, dtype=torch.bfloat16),
    "long_rows": dict(M=1024, N=65536, dtype=torch.bfloat16),
    "fp32": dict(M=4096, N=8192, dtype=torch.float32),
}
CPU_REGIMES = ("tiny", "odd", "fp16_small", "long_row")


def get_inputs(M=M, dtype=torch.float32):
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return [N]
