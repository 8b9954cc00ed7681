"""Small-output, long-K matrix multiply C = A @ B, A (M, K), B (K, N) with M, N <= 64, K ~ 1M.

A weight gradient over a long token axis (dW = X^T dY for a few features), or a low-rank
projection of a long sequence: few outputs, each a dot product of length K. With 256 outputs
there is far too little parallelism in (M, N) for 132 SMs; splitting K across programs (and
adding the partial products) is what fills the GPU. Memory-bound: 2 * M * N * K FLOPs against
reading A and B once, 16 x 16 x 1048576 bf16 = 67 MB, ~16 us at the 4.25 TB/s an H200 copies
at (docs/benchmarks.md, ceilings).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


M, N, K = 16, 16, 1048576

REGIMES = {
    # CPU (interpreter): the naive kernel runs one program per output, each a serial walk
    # over K in steps of 64, so outputs are few and K is in the hundreds.
    "tiny": dict(M=1, N=3, K=37),  # under one step along K
    "ragged": dict(M=3, N=2, K=700),  # 700 = 10 * 64 + 60
    "fp16": dict(M=2, N=3, K=400, dtype=torch.float16),
    # GPU (H200). 256 outputs of K = 1M, bf16.
    "k1m_bf16": dict(M=16, N=16, K=1048576, dtype=torch.bfloat16),
    # fp32 (IEEE: torch does not use TF32 for fp32 matmuls by default): 512 outputs, K = 512K;
    # B is 134 MB, read through columns 256 bytes apart.
    "k512k_fp32": dict(M=8, N=64, K=524288),
}
CPU_REGIMES = ("tiny", "ragged", "fp16")


def get_inputs(M=M, N=N, K=K, dtype=torch.float32):
    # A scaled by 1/sqrt(K) so every output is ~N(0, 1) at any K.
    A = (torch.randn(M, K) / K**0.5).to(dtype)
    B = torch.randn(K, N).to(dtype)
    return [A, B]


def get_init_inputs():
    return []


def flop_count(A, B):
    m, k = A.shape
    return 2.0 * m * B.shape[1] * k
