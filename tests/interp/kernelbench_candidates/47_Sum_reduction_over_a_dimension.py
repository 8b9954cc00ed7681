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
def _sum_kernel(x_ptr, y_ptr, R, INNER, BR: tl.constexpr, BI: tl.constexpr):
    o = tl.program_id(0)
    i = tl.program_id(1) * BI + tl.arange(0, BI)
    im = i < INNER
    acc = tl.zeros((BI,), tl.float32)
    for r0 in range(0, R, BR):
        r = r0 + tl.arange(0, BR)
        m = (r < R)[:, None] & im[None, :]
        x = tl.load(x_ptr + o * R * INNER + r[:, None] * INNER + i[None, :], mask=m, other=0.0)
        acc += tl.sum(x, axis=0)
    tl.store(y_ptr + o * INNER + i, acc, mask=im)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        shape = list(x.shape)
        d = self.dim % len(shape)
        outer = 1
        for s in shape[:d]:
            outer *= s
        inner = 1
        for s in shape[d + 1 :]:
            inner *= s
        R = shape[d]
        out_shape = [*shape[:d], 1, *shape[d + 1 :]]
        y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        BI = 64
        _sum_kernel[(outer, triton.cdiv(inner, BI))](x, y, R, inner, BR=32, BI=BI)
        return y
