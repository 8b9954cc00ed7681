"""Unseen kernel for mask_free_even_path: a looped three-pass row softmax whose mask-free path
is selected by a heuristic named DIVISIBLE (not EVEN_K), passed as `values=`, with the branches
the other way round in two loops (`if not DIVISIBLE:` holds the masked loads) and a mask helper
outside the `if` in the third. `triton.language` is imported as `lang`; parameters are annotated
with a bare `constexpr` (the interpreter reads `tl.constexpr` or `constexpr`, not
`lang.constexpr`). ModelNew for src/klineage/examples/softmax/problem.py."""

import torch
import torch.nn as nn
import triton
import triton.language as lang
from triton.language import constexpr


@triton.heuristics(values={"DIVISIBLE": lambda meta: meta["width"] % meta["TILE"] == 0})
@triton.jit
def row_softmax(src, dst, width, src_stride, dst_stride, TILE: constexpr, DIVISIBLE: constexpr):
    r = lang.program_id(0).to(lang.int64)
    src_row = src + r * src_stride
    dst_row = dst + r * dst_stride
    lanes = lang.arange(0, TILE)

    top = -float("inf")
    for c0 in range(0, width, TILE):
        idx = c0 + lanes
        if not DIVISIBLE:
            v = lang.load(src_row + idx, mask=idx < width, other=-float("inf"))
        else:
            v = lang.load(src_row + idx)
        top = lang.maximum(top, lang.max(v.to(lang.float32), axis=0))

    total = 0.0
    for c0 in range(0, width, TILE):
        idx = c0 + lanes
        if not DIVISIBLE:
            v = lang.load(src_row + idx, mask=idx < width, other=-float("inf"))
        else:
            v = lang.load(src_row + idx)
        total += lang.sum(lang.exp(v.to(lang.float32) - top), axis=0)

    for c0 in range(0, width, TILE):
        idx = c0 + lanes
        inside = idx < width
        if DIVISIBLE:
            v = lang.load(src_row + idx)
            y = lang.exp(v.to(lang.float32) - top) / total
            lang.store(dst_row + idx, y.to(dst.dtype.element_ty))
        else:
            v = lang.load(src_row + idx, mask=inside, other=0.0)
            y = lang.exp(v.to(lang.float32) - top) / total
            lang.store(dst_row + idx, y.to(dst.dtype.element_ty), mask=inside)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, width = x.shape
        y = torch.empty_like(x)
        # A small tile when it divides the row (the "half" regime, 200 columns: the mask-free
        # path), else a wide one (33 and 1023 columns: the masked path).
        tile = 8 if width % 8 == 0 else 256
        row_softmax[(rows,)](x, y, width, x.stride(0), y.stride(0), TILE=tile)
        return y
