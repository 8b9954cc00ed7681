import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _tanh(x):
    t = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - t) / (1.0 + t)
    return tl.where(x >= 0, y, -y)


@triton.jit
def _gelu(x):
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def _swish(x):
    return x * tl.sigmoid(x)


@triton.jit
def _mish(x):
    sp = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))
    return x * _tanh(sp)


@triton.jit
def _gemm_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    e_ptr,
    y_ptr,
    M,
    N,
    K,
    s1,
    s2,
    sxm,
    sxk,
    swn,
    swk,
    sym,
    syn,
    HAS_BIAS: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    rm = rows < M
    cm = cols < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + tl.arange(0, BK)
        km = ks < K
        a = tl.load(
            x_ptr + rows[:, None] * sxm + ks[None, :] * sxk,
            mask=rm[:, None] & km[None, :],
            other=0.0,
        )
        b = tl.load(
            w_ptr + ks[:, None] * swk + cols[None, :] * swn,
            mask=km[:, None] & cm[None, :],
            other=0.0,
        )
        acc += tl.dot(a, b, input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(b_ptr + cols, mask=cm, other=0.0)[None, :]
    pass
    tl.store(y_ptr + rows[:, None] * sym + cols[None, :] * syn, acc, mask=rm[:, None] & cm[None, :])


def _gemm(x, w, bias, extra, s1=0.0, s2=0.0, w_is_nk=True):
    """y = x @ w.T (+ bias) then the epilogue; w is (N, K) for nn.Linear, (K, N) otherwise."""
    M, K = x.shape
    if w_is_nk:
        N = w.shape[0]
        swn, swk = w.stride(0), w.stride(1)
    else:
        N = w.shape[1]
        swk, swn = w.stride(0), w.stride(1)
    y = torch.empty((M, N), device=x.device, dtype=torch.float32)
    BM, BN, BK = 32, 32, 32
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    _gemm_kernel[grid](
        x,
        w,
        bias if bias is not None else y,
        extra if extra is not None else y,
        y,
        M,
        N,
        K,
        s1,
        s2,
        x.stride(0),
        x.stride(1),
        swn,
        swk,
        y.stride(0),
        y.stride(1),
        HAS_BIAS=bias is not None,
        BM=BM,
        BN=BN,
        BK=BK,
    )
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _gemm(A, B, None, None, w_is_nk=False)
