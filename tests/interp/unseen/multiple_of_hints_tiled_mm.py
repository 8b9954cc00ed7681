"""Unseen kernel for multiple_of_hints: a 2-D-grid matmul with its own names and hint layout.

triton.language as `T`, a bare multiple_of on the column offsets, a max_contiguous over a
multiple_of on the rows, and the K loop's induction variable hinted inside a tl.range loop.
"""

import torch
import torch.nn as nn
import triton
import triton.language as T
from triton.language import constexpr  # the CPU interpreter only sees `tl.constexpr`/`constexpr`


@triton.jit
def mm_tiles(
    a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
    TM: constexpr, TN: constexpr, TK: constexpr,
):  # fmt: skip
    pm = T.program_id(0)
    pn = T.program_id(1)
    rows = T.max_contiguous(T.multiple_of(pm * TM + T.arange(0, TM), TM), TM)
    cols = T.multiple_of(pn * TN + T.arange(0, TN), TN)
    ks = T.arange(0, TK)
    acc = T.zeros((TM, TN), dtype=T.float32)
    for k0 in T.range(0, K, TK):
        k0 = T.multiple_of(k0, TK)
        kk = k0 + ks
        x = T.load(
            a + rows[:, None] * sam + kk[None, :] * sak,
            mask=(rows[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        y = T.load(
            b + kk[:, None] * sbk + cols[None, :] * sbn,
            mask=(kk[:, None] < K) & (cols[None, :] < N),
            other=0.0,
        )
        if a.dtype.element_ty == T.float32:
            acc = T.dot(x, y, acc, input_precision="ieee")
        else:
            acc = T.dot(x, y, acc)
    T.store(
        c + rows[:, None] * scm + cols[None, :] * scn,
        acc.to(c.dtype.element_ty),
        mask=(rows[:, None] < M) & (cols[None, :] < N),
    )


class ModelNew(nn.Module):
    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        mm_tiles[grid](
            A, B, C, M, N, K,
            A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
            TM=32, TN=32, TK=32,
        )  # fmt: skip
        return C
