"""Unseen kernel for persistent_grid: RMSNorm whose programs stride over the rows.

Different from the corpus: one row per loop iteration (no row blocks), plain `range` with
`axis=` keywords, program id and grid size held in locals, and the cap `min(M, programs)`
written directly in the launch's grid. Problem: src/klineage/kernels/rmsnorm.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_rows(x_ptr, w_ptr, y_ptr, n_rows, n_cols, eps, sx, sy, COLS: tl.constexpr):
    first = tl.program_id(axis=0)
    step = tl.num_programs(axis=0)
    c = tl.arange(0, COLS)
    cm = c < n_cols
    w = tl.load(w_ptr + c, mask=cm, other=0.0).to(tl.float32)
    for r in range(first, n_rows, step):
        v = tl.load(x_ptr + r * sx + c, mask=cm, other=0.0).to(tl.float32)
        inv = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / n_cols + eps)
        tl.store(y_ptr + r * sy + c, (v * inv * w).to(y_ptr.dtype.element_ty), mask=cm)


def _programs(t):
    # A few programs per SM on the GPU; 3 on the CPU interpreter so the loop runs many times.
    if t.is_cuda:
        return torch.cuda.get_device_properties(t.device).multi_processor_count * 4
    return 3


def rmsnorm(x, w, eps):
    n = x.shape[-1]
    x2 = x.reshape(-1, n).contiguous()
    M = x2.shape[0]
    y = torch.empty_like(x2)
    cols = triton.next_power_of_2(n)
    rms_rows[(min(M, _programs(x2)),)](x2, w, y, M, n, eps, x2.stride(0), y.stride(0), COLS=cols)
    return y.reshape(x.shape)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x):
        return rmsnorm(x, self.weight, self.eps)
