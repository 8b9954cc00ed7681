"""The reference's answers as the checker reads them: from the parent's private folder, which
the candidate's process cannot reach, each case's expected outputs (and, where a comparison
needs it, its float64 evaluation)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.gate.cases import nbytes
from klineage.gate.protocol import RefCase, RefManifest

KEEP_EXPECTED_BYTES = 2 << 30
"""Bytes of reference outputs the checker keeps in memory, least recently used dropped first.
The correctness loop runs every case of a regime under each autotune config in turn, so it reads
each case's expected output once per config: kept, a regime's cases (7 x 168 MB on the reverse
cumsum's largest) are read from disk once, not 16 times for a 16-config table."""


@dataclass
class Expected:
    """The reference's answers, read from the parent's private folder."""

    folder: Path
    manifest: RefManifest
    cache: OrderedDict[str, list[Any]] = field(default_factory=OrderedDict)
    keep_bytes: int = KEEP_EXPECTED_BYTES

    def outputs(self, case: RefCase) -> list[Any]:
        if case.expected in self.cache:
            self.cache.move_to_end(case.expected)
            return self.cache[case.expected]
        import torch

        outs = list(torch.load(self.folder / case.expected, weights_only=True)["outputs"])
        held = nbytes(outs)
        for key in list(self.cache):  # oldest first; the new one stays even alone over the cap
            if held + sum(nbytes(v) for v in self.cache.values()) <= self.keep_bytes:
                break
            del self.cache[key]
        self.cache[case.expected] = outs
        return outs

    def float64(self, case: RefCase) -> list[Any] | None:
        """The reference evaluated in float64, per output (None where it was not), read only
        when a comparison needs it: the expected output plus the stored difference."""
        if not case.float64:
            return None
        import torch

        deltas = torch.load(self.folder / case.float64, weights_only=True)["deltas"]
        return [
            w.double() + d.double() if isinstance(d, torch.Tensor) else None
            for w, d in zip(self.outputs(case), deltas, strict=False)
        ]
