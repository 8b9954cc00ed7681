"""Cross-entropy forward over a large vocabulary (mean over non-ignored rows, ignore_index=-100).

The LM-head loss: logits (B, V) with B = tokens and V = vocabulary size (Llama-3: 128256).
The reference upcasts to fp32 and returns a 0-dim fp32 tensor. Memory-bound: the floor is
reading the logits once (plus the targets), e.g. 8192 x 128256 bf16 = 2.1 GB.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

IGNORE_INDEX = -100


class Model(nn.Module):
    def forward(self, logits, targets):
        return F.cross_entropy(logits.float(), targets, ignore_index=IGNORE_INDEX, reduction="mean")


B, V = 8192, 128256

REGIMES = {
    # CPU (interpreter): tiny, odd and non-power-of-two vocabularies; long_row spans several
    # vocabulary chunks for every block size so the online rescaling is exercised.
    "tiny": dict(B=7, V=1000),
    "odd": dict(B=5, V=3001),
    "long_row": dict(B=3, V=20011),
    "fp16_small": dict(B=6, V=5003, dtype=torch.float16),
    # GPU: Llama-3 vocabulary (the anchor), a Llama-2-sized vocabulary with more rows, and a
    # Gemma-sized vocabulary with few rows (fewer programs than a full wave would like).
    "llama3": dict(B=8192, V=128256, dtype=torch.bfloat16),
    "llama2": dict(B=4096, V=32000, dtype=torch.bfloat16),
    "gemma_vocab": dict(B=1024, V=256000, dtype=torch.bfloat16),
}
CPU_REGIMES = ("tiny", "odd", "long_row", "fp16_small")


def get_inputs(B=B, V=V, dtype=torch.float32, ignore_frac=0.1):
    logits = torch.randn(B, V, dtype=dtype)
    targets = torch.randint(0, V, (B,), dtype=torch.int64)
    ignore = torch.rand(B) < ignore_frac
    # Keep row 0 a real target so the mean is never 0/0 (the reference gives nan then).
    ignore[0] = False
    targets = targets.masked_fill(ignore, IGNORE_INDEX)
    return [logits, targets]


def get_init_inputs():
    return []
