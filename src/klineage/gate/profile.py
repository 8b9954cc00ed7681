"""The profile stage (GPU only): candidate, eager reference and torch.compile timed alike.

Medians of triton.testing.do_bench (CUDA events, L2 flushed between runs), p20/p80 kept. The
roofline floor is the fewest bytes (inputs read once, outputs written once) over the measured
copy bandwidth, or the problem's flop_count over the matmul rate, whichever is larger. A
candidate under that floor computed at the datasheet peaks, or more than max_speedup_vs_reference times faster than eager, is
flagged: physics says it skipped work or cached a result.
"""

from __future__ import annotations

import time
from typing import Any

from klineage.gate.records import RegimeOutcome, Stage, StageResult, Status
from klineage.gate.request import GateRequest


def _nbytes(values: Any) -> int:
    import torch

    from klineage.gate.compare import as_outputs

    return sum(
        v.numel() * v.element_size() for v in as_outputs(values) if isinstance(v, torch.Tensor)
    )


def floor_from(
    nbytes: int, flops: float | None, cfg: Any, *, peak: bool = False
) -> tuple[float, str]:
    """The roofline floor in ms: measured ceilings by default, datasheet peaks with peak=True."""
    bytes_ms = nbytes / (cfg.peak_bytes_per_s if peak else cfg.copy_bytes_per_s) * 1e3
    if flops is not None:
        flops_ms = flops / (cfg.peak_flops_per_s if peak else cfg.matmul_flops_per_s) * 1e3
        if flops_ms > bytes_ms:
            return flops_ms, "flops"
    return bytes_ms, "bytes"


def floor_ms(
    problem: Any, inputs: list[Any], outputs: Any, req: GateRequest, *, peak: bool = False
) -> tuple[float, str]:
    """The roofline floor of one call: inputs read once, outputs written once, or flop_count."""
    nbytes = _nbytes(inputs) + _nbytes(outputs)
    flop_count = getattr(problem.module, "flop_count", None)
    flops = float(flop_count(*inputs)) if callable(flop_count) else None
    return floor_from(nbytes, flops, req.config, peak=peak)


def spin_up_gpu(ms: float, device: str = "cuda") -> int:
    """Keep the device busy for `ms` milliseconds of wall time (bf16 matmuls), so timing and
    autotuning start at working clocks, not the idle ones (an H200 reads 345 MHz idle, 1980
    MHz at most). Gate calls of several workers leave the GPU idle between their locked stages.
    Nothing of the card's settings is touched. Returns the number of matmuls run."""
    import torch

    n = 2048 if device == "cuda" else 64
    a = torch.randn(
        n, n, device=device, dtype=torch.bfloat16 if device == "cuda" else torch.float32
    )
    t0, runs = time.perf_counter(), 0
    while (time.perf_counter() - t0) * 1e3 < ms:
        for _ in range(4):
            a @ a
        runs += 4
        if device == "cuda":
            torch.cuda.synchronize()
    return runs


def profile_stage(req: GateRequest, regimes: list[Any], checker: Any, event: Any) -> StageResult:
    """Time the candidate on each verified regime (in its harness), beside the reference's
    eager and torch.compile times (measured in the reference's process), and flag results
    faster than physics."""
    cfg = req.config
    t0 = time.perf_counter()
    rows: dict[str, dict[str, Any]] = {}
    outcomes: list[RegimeOutcome] = []
    suspicious: list[str] = []
    for regime in regimes:
        event("progress", detail=f"profile {regime.name}")
        reply = checker.time(regime)
        if not reply.ok:
            return StageResult(
                stage=Stage.PROFILE,
                status=Status.FAILED,
                message=f"{regime.name}: timing failed: {reply.error}",
            )
        row: dict[str, Any] = {
            "kernel_ms": reply.p50,
            "kernel_p20_ms": reply.p20,
            "kernel_p80_ms": reply.p80,
        }
        row["floor_ms"], row["floor_kind"] = floor_from(regime.nbytes, regime.flops, cfg)
        row["peak_floor_ms"] = floor_from(regime.nbytes, regime.flops, cfg, peak=True)[0]
        if regime.eager_ms is not None:
            row["eager_ms"] = regime.eager_ms
            row["speedup_vs_eager"] = regime.eager_ms / reply.p50
        if regime.compile_ms is not None:
            row["compile_ms"] = regime.compile_ms
            row["speedup_vs_compile"] = regime.compile_ms / reply.p50
        if regime.compile_error:
            row["compile_error"] = regime.compile_error
        row["pct_of_floor"] = 100.0 * row["floor_ms"] / reply.p50
        rows[regime.name] = row
        why = []
        if row["kernel_ms"] < row["peak_floor_ms"]:
            why.append(
                f"{row['kernel_ms']:.4g} ms is under the roofline floor {row['peak_floor_ms']:.4g} ms ({row['floor_kind']}, datasheet peaks)"
            )
        if row.get("speedup_vs_eager", 0.0) > cfg.max_speedup_vs_reference:
            why.append(
                f"{row['speedup_vs_eager']:.1f}x faster than eager (limit {cfg.max_speedup_vs_reference:g}x)"
            )
        status = Status.PASSED
        msg = f"{row['kernel_ms']:.4g} ms, {row.get('speedup_vs_eager', float('nan')):.2f}x eager, {row['pct_of_floor']:.0f}% of floor"
        if why:
            row["suspicious"] = why
            suspicious.append(f"{regime.name}: " + "; ".join(why))
            if not cfg.allow_suspicious:
                status = Status.FAILED
            msg += " [suspicious: " + "; ".join(why) + "]"
        outcomes.append(RegimeOutcome(regime=regime.name, status=status, message=msg))
    if suspicious and not cfg.allow_suspicious:
        return StageResult(
            stage=Stage.PROFILE, status=Status.FAILED, regimes=outcomes, numbers={"regimes": rows},
            message="suspiciously fast (rerun with --allow-suspicious if you are sure): " + " | ".join(suspicious),
            seconds=time.perf_counter() - t0,
        )  # fmt: skip
    return StageResult(
        stage=Stage.PROFILE, status=Status.PASSED, message="; ".join(f"{o.regime}: {o.message}" for o in outcomes),
        regimes=outcomes, numbers={"regimes": rows}, seconds=time.perf_counter() - t0,
    )  # fmt: skip
