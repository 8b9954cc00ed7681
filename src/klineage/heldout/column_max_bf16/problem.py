"""Per-column maximum: y[j] = max_i x[i, j], torch.amax over dim 0 of x (M, N), bf16 on the GPU.

Max-pooling over the token axis of (tokens, channels) activations, or the per-channel range of
a calibration pass before quantization. Exact in every dtype (the result is one of the
inputs), so the only cost is reading x; the reduction runs down the columns while memory is
contiguous along the rows. Memory-bound: the floor is reading x once, 524288 x 384 bf16 =
403 MB, ~95 us at the 4.25 TB/s an H200 copies at (docs/benchmarks.md, ceilings).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.amax(x, dim=0)


M, N = 524288, 384

REGIMES = {
    # CPU (interpreter), fp32 and fp16 only: bf16 is not usable in the interpreter (wrong
    # values from a bf16 load and store), so the GPU's bf16 regimes are not checked there.
    # One program per column in the naive kernel, a serial walk down the rows, so M stays
    # small; N is large beside it because a row is seen only where it holds a column's
    # maximum: with 5 rows of 40 columns, a kernel that skips any one row is wrong in some
    # column with probability 1 - (4/5)^40 > 0.9999; with 70 rows of 512 columns, 1 - (69/70)^512
    # > 0.999 (at 24 columns it was one trial in 3: a split over rows that lost the row at a
    # chunk boundary passed, tests/interp/test_split_k_gate.py).
    "tiny": dict(M=5, N=40),  # fewer rows than one step of the walk
    "ragged_fp16": dict(M=70, N=512, dtype=torch.float16),  # 70 = 2 * 32 + 6
    # GPU (H200), bf16. Very tall and narrow: 384 columns (under 3 per SM) of 524288 rows.
    "tall": dict(M=524288, N=384, dtype=torch.bfloat16),
    # Square, 302 MB: 12288 columns, enough programs; each walk 12288 rows.
    "square": dict(M=12288, N=12288, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "ragged_fp16")


def get_inputs(M=M, N=N, dtype=torch.float32):
    # Log-probabilities: every value negative, so a maximum started at (or padded with) zero
    # instead of -inf is wrong everywhere.
    return [torch.log_softmax(torch.randn(M, N), dim=1).to(dtype)]


def get_init_inputs():
    return []
