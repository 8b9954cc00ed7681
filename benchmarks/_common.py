"""Shared by the benchmark scripts: ceilings, timing, and the environment every row carries."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def out_dir() -> Path:
    """$OUT on the device machine, else ./bench-out."""
    p = Path(os.environ.get("OUT") or "bench-out")
    p.mkdir(parents=True, exist_ok=True)
    return p


def bench_ms(fn: Any, warmup_ms: float = 25.0, rep_ms: float = 100.0) -> float:
    """Median of triton.testing.do_bench (CUDA events, L2 flushed between runs), as the gate times."""
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def measure_ceilings() -> dict[str, float]:
    """Device copy bandwidth (bytes read + written) and bf16 matmul rate, measured now."""
    import torch

    x = torch.randn(512 * 1024 * 1024, dtype=torch.bfloat16, device="cuda")  # 1 GiB
    y = torch.empty_like(x)
    copy_ms = bench_ms(lambda: y.copy_(x))
    bw = 2 * x.numel() * x.element_size() / (copy_ms * 1e-3)
    n = 8192
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    mm_ms = bench_ms(lambda: a @ b)
    rate = 2 * n**3 / (mm_ms * 1e-3)
    return {"copy_bytes_per_s": bw, "bf16_matmul_flops_per_s": rate}


def append_jsonl(path: Path, row: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row, default=str) + "\n")
