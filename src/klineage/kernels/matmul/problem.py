"""Dense matrix multiply C = A @ B, A (M, K), B (K, N), output in the input dtype.

Compute-bound at the large shapes: the floor is 2 * M * N * K FLOPs over the measured bf16
tensor-core rate (680 TFLOP/s through cuBLAS at 8192^3 on the H200, shared/ANCHORS.md), e.g.
4096^3 = 137 GFLOP, ~0.20 ms. The skinny regime (M = 16) is instead bound by reading B once
(8192 x 8192 bf16 = 134 MB, ~32 us at 4.25 TB/s), where big square tiles waste most of their
rows and the number of programs, not the tile shape, decides the speed.

fp16/bf16 kernels must accumulate in fp32; fp32 inputs must be multiplied in full IEEE fp32
(no TF32) to meet the 1e-4 tolerance.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


M, N, K = 4096, 4096, 4096

REGIMES = {
    # CPU (interpreter). The expert's autotune table has BLOCK_SIZE_K in {32, 64, 128}, so each
    # CPU regime exercises both the mask-free EVEN_K path and the masked K tail for some config.
    # Tiny fp16, nothing a multiple of a tile in M or N; K = 64 is even for BK 32/64, not 128.
    "tiny_fp16": dict(M=37, N=45, K=64, dtype=torch.float16),
    # Odd fp32: K = 33 is a multiple of no BLOCK_SIZE_K (masked K tail for every config).
    "odd_fp32": dict(M=48, N=70, K=33, dtype=torch.float32),
    # fp32 where K = 128 divides every BLOCK_SIZE_K (mask-free K loop for every config),
    # M and N still ragged.
    "even_k_fp32": dict(M=65, N=36, K=128, dtype=torch.float32),
    # fp16 with several K iterations and a ragged K tail (100 = 3 * 32 + 4).
    "odd_fp16": dict(M=19, N=130, K=100, dtype=torch.float16),
    # GPU (H200). The target: >= 85% of cuBLAS at 4096^3 bf16.
    "square_4096": dict(M=4096, N=4096, K=4096, dtype=torch.bfloat16),
    "square_8192": dict(M=8192, N=8192, K=8192, dtype=torch.bfloat16),
    # Skinny (decode-like): one row tile, 8192 / BLOCK_SIZE_N programs; memory-bound on B.
    "skinny_m16": dict(M=16, N=8192, K=8192, dtype=torch.bfloat16),
    "square_2048_fp16": dict(M=2048, N=2048, K=2048, dtype=torch.float16),
}
CPU_REGIMES = ("tiny_fp16", "odd_fp32", "even_k_fp32", "odd_fp16")


def get_inputs(M=M, N=N, K=K, dtype=torch.bfloat16):
    return [torch.randn(M, K, dtype=dtype), torch.randn(K, N, dtype=dtype)]


def get_init_inputs():
    return []


def flop_count(A, B):
    M, K = A.shape
    N = B.shape[1]
    return 2.0 * M * N * K
