"""How many threads torch's CPU work uses in a gate call's processes (issue 14: a gate that
holds under load)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from klineage.errors import UsageError


def gate_threads(device: str) -> int | None:
    """Threads for torch's CPU work in each of a gate call's processes (None: torch's default,
    one per core). On a GPU host several gate calls run at once (an optimize loop's workers),
    and each of their parents, references and harnesses starting one thread per core put
    hundreds of spinning OpenMP threads on 16 cores: a quarter of the cores each by default,
    `KLINEAGE_GATE_THREADS=N` to choose. On the CPU the interpreter's work is the call itself."""
    raw = os.environ.get("KLINEAGE_GATE_THREADS", "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise UsageError(
                f"KLINEAGE_GATE_THREADS={raw!r}: expected a whole number of threads, 1 or more"
            )
        return int(raw)
    return max(1, (os.cpu_count() or 4) // 4) if device == "cuda" else None


@contextlib.contextmanager
def torch_threads(device: str) -> Iterator[None]:
    """The parent's own torch work (comparisons, reading outputs) on gate_threads(device)."""
    n = gate_threads(device)
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
