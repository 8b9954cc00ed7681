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
from klineage.gate.request import EventWriter, GateRequest


def _bench(fn: Any, warmup_ms: float, rep_ms: float) -> dict[str, float]:
    import triton.testing

    p20, p50, p80 = triton.testing.do_bench(
        fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.2, 0.5, 0.8]
    )
    return {"p20": float(p20), "p50": float(p50), "p80": float(p80)}


def _nbytes(values: Any) -> int:
    import torch

    from klineage.gate.compare import as_outputs

    return sum(
        v.numel() * v.element_size() for v in as_outputs(values) if isinstance(v, torch.Tensor)
    )


def floor_ms(
    problem: Any, inputs: list[Any], outputs: Any, req: GateRequest, *, peak: bool = False
) -> tuple[float, str]:
    """The roofline floor: measured ceilings by default, datasheet peaks with peak=True."""
    cfg = req.config
    nbytes = _nbytes(inputs) + _nbytes(outputs)
    bytes_ms = nbytes / (cfg.peak_bytes_per_s if peak else cfg.copy_bytes_per_s) * 1e3
    flop_count = getattr(problem.module, "flop_count", None)
    if callable(flop_count):
        flops_ms = (
            float(flop_count(*inputs))
            / (cfg.peak_flops_per_s if peak else cfg.matmul_flops_per_s)
            * 1e3
        )
        if flops_ms > bytes_ms:
            return flops_ms, "flops"
    return bytes_ms, "bytes"


def profile_regime(req: GateRequest, problem: Any, candidate: Any, regime: str) -> dict[str, Any]:
    import torch

    from klineage.gate.worker import build_models, trial_seed

    cfg = req.config
    models = build_models(problem, candidate, regime, "cuda", cfg.seed)
    torch.manual_seed(trial_seed(cfg.seed, regime, 0))
    inputs = problem.make_inputs(regime, "cuda")
    row: dict[str, Any] = {}
    with torch.no_grad(), problem.regime_globals(regime):
        out = models.reference(*inputs)
        row["floor_ms"], row["floor_kind"] = floor_ms(problem, inputs, out, req)
        row["peak_floor_ms"] = floor_ms(problem, inputs, out, req, peak=True)[0]
        kernel = _bench(lambda: models.candidate(*inputs), cfg.warmup_ms, cfg.rep_ms)
        eager = _bench(lambda: models.reference(*inputs), cfg.warmup_ms, cfg.rep_ms)
        row.update(
            kernel_ms=kernel["p50"],
            kernel_p20_ms=kernel["p20"],
            kernel_p80_ms=kernel["p80"],
            eager_ms=eager["p50"],
        )
        if cfg.profile_compile:
            try:
                compiled = torch.compile(models.reference)
                compiled(*inputs)
                row["compile_ms"] = _bench(lambda: compiled(*inputs), cfg.warmup_ms, cfg.rep_ms)[
                    "p50"
                ]
            except (
                Exception
            ) as e:  # torch.compile failing is a fact about the baseline, not the candidate
                row["compile_error"] = (
                    f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                )
    row["speedup_vs_eager"] = row["eager_ms"] / row["kernel_ms"]
    if "compile_ms" in row:
        row["speedup_vs_compile"] = row["compile_ms"] / row["kernel_ms"]
    row["pct_of_floor"] = 100.0 * row["floor_ms"] / row["kernel_ms"]
    return row


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


def profile_regimes(
    req: GateRequest, problem: Any, candidate: Any, regimes: list[str], events: EventWriter
) -> StageResult:
    cfg = req.config
    t0 = time.perf_counter()
    if cfg.spin_up_ms > 0:
        events.progress(f"spin-up {cfg.spin_up_ms:g} ms")
        spin_up_gpu(cfg.spin_up_ms)
    rows: dict[str, dict[str, Any]] = {}
    outcomes: list[RegimeOutcome] = []
    suspicious: list[str] = []
    for regime in regimes:
        events.progress(f"profile {regime}")
        row = profile_regime(req, problem, candidate, regime)
        rows[regime] = row
        why = []
        if row["kernel_ms"] < row["floor_ms"]:
            why.append(
                f"{row['kernel_ms']:.4g} ms is under the roofline floor {row['floor_ms']:.4g} ms ({row['floor_kind']})"
            )
        if row["speedup_vs_eager"] > cfg.max_speedup_vs_reference:
            why.append(
                f"{row['speedup_vs_eager']:.1f}x faster than eager (limit {cfg.max_speedup_vs_reference:g}x)"
            )
        status = Status.PASSED
        msg = f"{row['kernel_ms']:.4g} ms, {row['speedup_vs_eager']:.2f}x eager, {row['pct_of_floor']:.0f}% of floor"
        if why:
            row["suspicious"] = why
            suspicious.append(f"{regime}: " + "; ".join(why))
            if not cfg.allow_suspicious:
                status = Status.FAILED
            msg += " [suspicious: " + "; ".join(why) + "]"
        outcomes.append(RegimeOutcome(regime=regime, status=status, message=msg))
    if suspicious and not cfg.allow_suspicious:
        return StageResult(
            stage=Stage.PROFILE, status=Status.FAILED, regimes=outcomes, numbers={"regimes": rows},
            message="suspiciously fast (rerun with --allow-suspicious if you are sure): " + " | ".join(suspicious),
            seconds=time.perf_counter() - t0,
        )  # fmt: skip
    summary = "; ".join(f"{o.regime}: {o.message}" for o in outcomes)
    return StageResult(
        stage=Stage.PROFILE,
        status=Status.PASSED,
        message=summary,
        regimes=outcomes,
        numbers={"regimes": rows},
        seconds=time.perf_counter() - t0,
    )
