"""Unseen kernel for grouped_launch_order: a matmul with the grouped program order written
inline in the kernel (no helper), a literal group size of 4 and its own variable names, one
fixed tile. ModelNew for src/klineage/kernels/matmul/problem.py."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_kernel(A, B, C, M, N, K, sam, sak, sbk, sbn, scm, scn,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    band = 4 * tiles_n
    band_id = pid // band
    row0 = band_id * 4
    rows_here = tl.minimum(tiles_m - row0, 4)
    tm = row0 + ((pid % band) % rows_here)
    tn = (pid % band) // rows_here

    rm = tm * BM + tl.arange(0, BM)
    rn = tn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(A + rm[:, None] * sam + rk[None, :] * sak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)  # fmt: skip
        b = tl.load(B + rk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)  # fmt: skip
        if A.dtype.element_ty == tl.float32:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
    out = C + rm[:, None] * scm + rn[None, :] * scn
    tl.store(out, acc.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        grid = (triton.cdiv(M, 32) * triton.cdiv(N, 32),)
        gemm_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                          C.stride(0), C.stride(1), BM=32, BN=32, BK=32)  # fmt: skip
        return C
