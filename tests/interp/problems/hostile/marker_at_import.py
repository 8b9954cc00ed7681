"""Hostile (problem-fault): an otherwise valid softmax problem whose import writes a file outside any temporary directory (Path.home() / "klineage-hostile-marker"), standing in for deleting or creating the user's files.
Expect: accepted, and the real home holds no marker — the gate imports problems in a sandbox whose HOME is a private folder, so the write lands there and is thrown away.

Safety: it only creates (or rewrites) that one marker file; nothing is deleted.
"""

from pathlib import Path

import torch
import torch.nn as nn

(Path.home() / "klineage-hostile-marker").write_text("hostile marker_at_import.py\n")


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


REGIMES = {
    "tiny_rows": dict(M=37, N=33),
    "odd": dict(M=6, N=1023),
}
CPU_REGIMES = ("tiny_rows", "odd")


def get_inputs(M=37, N=33, dtype=torch.float32):
    return [torch.randn(M, N, dtype=dtype)]


def get_init_inputs():
    return []
