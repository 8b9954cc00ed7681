"""A correct Triton candidate for problems/kb_linear_bias_relu.py: relu(x @ W.T + b) in one kernel, with a cache
eviction hint on the bias for distill to remove."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_bias_relu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rm[:, None] * K + rk[None, :],
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)  # fmt: skip
        w = tl.load(w_ptr + rn[None, :] * K + rk[:, None],
                    mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)  # fmt: skip
        acc += tl.dot(x, w, input_precision="ieee")
    b = tl.load(b_ptr + rn, mask=rn < N, other=0.0, eviction_policy="evict_last")
    y = tl.maximum(acc + b[None, :], 0.0)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], y, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))
        linear_bias_relu_kernel[grid](x, w, self.bias, out, M, N, K,
                                      BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)  # fmt: skip
        return out
