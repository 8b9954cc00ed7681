"""Hostile (cache-and-store): a correct Triton softmax whose import also writes a file into the user's home (Path.home() / "klineage-hostile-marker-candidate"), standing in for deleting or overwriting the user's files.
Expect: load — the hardened gate's sandbox gives the candidate no writable home (its import's write raises), and the real home must hold no marker afterwards.

Safety: only this one marker file is created (or rewritten); nothing is deleted or overwritten.
"""

from pathlib import Path

import torch
import torch.nn as nn
import triton
import triton.language as tl

MARKER = Path.home() / "klineage-hostile-marker-candidate"
MARKER.write_text("written by tests/interp/candidates/hostile/home_marker_write.py at import\n")


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    x = x.contiguous()
    m, n = x.shape
    y = torch.empty_like(x)
    _softmax_kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax(x)
