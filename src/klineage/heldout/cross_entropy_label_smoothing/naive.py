"""Label-smoothed cross-entropy per row, as a newcomer would first write it in Triton.

One program per row of logits, the whole row in one masked block of next_power_of_2(V) lanes
(so long vocabularies make big blocks; no chunking). In fp32 the program finds the row max,
the log-sum-exp, the sum of the logits and the target's logit (one masked scalar load), and
stores lse - (1 - eps) * x_t - eps * sum / V. Four warps.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SMOOTHING = 0.1


@triton.jit
def smoothed_xent_rows(
    logit_ptr, label_ptr, loss_ptr, logit_stride, n_classes, smoothing, VBLOCK: tl.constexpr
):
    b = tl.program_id(0).to(tl.int64)
    v = tl.arange(0, VBLOCK)
    real = v < n_classes
    row = logit_ptr + b * logit_stride
    z = tl.load(row + v, mask=real, other=float("-inf")).to(tl.float32)
    top = tl.max(z, axis=0)
    lse = top + tl.log(tl.sum(tl.exp(z - top), axis=0))
    z_sum = tl.sum(tl.where(real, z, 0.0), axis=0)
    label = tl.load(label_ptr + b)
    label_ok = (label >= 0) & (label < n_classes)
    z_label = tl.load(row + label, mask=label_ok, other=0.0).to(tl.float32)
    loss = lse - (1.0 - smoothing) * z_label - smoothing * (z_sum / n_classes)
    tl.store(loss_ptr + b, loss)


class ModelNew(nn.Module):
    def __init__(self, smoothing=SMOOTHING):
        super().__init__()
        self.smoothing = smoothing

    def forward(self, logits, targets):
        logits = logits.contiguous()
        targets = targets.contiguous()
        n_rows, n_classes = logits.shape
        losses = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        smoothed_xent_rows[(n_rows,)](
            logits,
            targets,
            losses,
            logits.stride(0),
            n_classes,
            self.smoothing,
            VBLOCK=triton.next_power_of_2(n_classes),
            num_warps=4,
        )
        return losses
