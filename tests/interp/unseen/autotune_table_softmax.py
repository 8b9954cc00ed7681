"""Unseen kernel for autotune_table: row softmax (src/klineage/examples/softmax/problem.py).

Differs from the corpus on purpose: `from triton import Config, autotune`, the configs passed
positionally from a module-level TUNING list, `triton.language` imported as `lang`, a chunk
parameter named CHUNK, and a two-pass online softmax over column chunks.
"""

import torch
import torch.nn as nn
import triton
import triton.language as lang
from triton import Config, autotune
from triton.language import constexpr

TUNING = [
    Config({"CHUNK": 64}, num_warps=2),  # short rows
    Config({"CHUNK": 256}, num_warps=4),
    Config({"CHUNK": 1024}, num_warps=8),  # long rows
]


@autotune(TUNING, key=["n_cols"])
@triton.jit
def row_softmax(out, inp, n_cols, stride, CHUNK: constexpr):
    r = lang.program_id(0).to(lang.int64)
    src = inp + r * stride
    dst = out + r * stride
    offs = lang.arange(0, CHUNK)
    mx = -float("inf")
    tot = 0.0
    for c in range(0, n_cols, CHUNK):
        v = lang.load(src + c + offs, mask=c + offs < n_cols, other=-float("inf"))
        v = v.to(lang.float32)
        new = lang.maximum(mx, lang.max(v, 0))
        tot = tot * lang.exp(mx - new) + lang.sum(lang.exp(v - new), 0)
        mx = new
    for c in range(0, n_cols, CHUNK):
        v = lang.load(src + c + offs, mask=c + offs < n_cols, other=0.0).to(lang.float32)
        y = lang.exp(v - mx) / tot
        lang.store(dst + c + offs, y.to(out.dtype.element_ty), mask=c + offs < n_cols)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        row_softmax[(x.shape[0],)](y, x, x.shape[1], x.stride(0))
        return y
