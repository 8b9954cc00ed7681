"""Matrix-vector product y = W @ x, W (N, K), x (K,), y (N,): one decode token through a layer.

Memory-bound: every element of W is read once for 2 FLOPs, so the floor is W's bytes over the
copy bandwidth (28672 x 8192 bf16 = 470 MB, ~110 us at 4.25 TB/s on the H200). With few long
rows (2048 x 65536) the same bytes sit in fewer rows, and a kernel that gives each program a
block of rows has too few programs to keep every SM streaming.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, W, x):
        return torch.mv(W, x)


N, K = 28672, 8192

REGIMES = {
    # CPU (interpreter). Ragged fp16: no 64-row block divides N, no 128-wide chunk divides K.
    "cpu_ragged_fp16": dict(N=100, K=300, dtype=torch.float16),
    # fp32, ragged, K one element past a chunk.
    "cpu_fp32": dict(N=37, K=129, dtype=torch.float32),
    # Aligned fp16: full row blocks, four full K chunks.
    "cpu_aligned_fp16": dict(N=128, K=512, dtype=torch.float16),
    # GPU (H200), bf16. Many rows (a Llama FFN up/gate width): 448 row blocks of 64.
    "rows_28672": dict(N=28672, K=8192, dtype=torch.bfloat16),
    # Few, long rows: 32 row blocks of 64 for 132 SMs; K-parallelism is what pays.
    "long_k_65536": dict(N=2048, K=65536, dtype=torch.bfloat16),
}
CPU_REGIMES = ("cpu_ragged_fp16", "cpu_fp32", "cpu_aligned_fp16")


def get_inputs(N=N, K=K, dtype=torch.bfloat16):
    # W scaled by 1/sqrt(K) so y ~ N(0, 1) at every K (a real layer's weight scale).
    W = (torch.randn(N, K) / K**0.5).to(dtype)
    x = torch.randn(K, dtype=dtype)
    return [W, x]


def get_init_inputs():
    return []


def flop_count(W, x):
    n, k = W.shape
    return 2.0 * n * k
