"""Typed settings, each backed by an environment variable; CLI options override them.

Modelled on Triton's knobs: one place lists every setting, its variable and its default.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from klineage.errors import UsageError

# KernelBench and followers: fp32 1e-4, fp16/bf16 1e-2, as both atol and rtol.
DEFAULT_TOLERANCES: dict[str, float] = {
    "float32": 1e-4,
    "float64": 1e-6,
    "float16": 1e-2,
    "bfloat16": 1e-2,
}
# Looser than this and a wrong kernel (say, an off-by-one row) can pass in half precision.
MAX_TOLERANCE = 5e-2

# Ceilings measured on our H200 (shared/ANCHORS.md, 2026-11-30): device copy 4.25 TB/s counting
# bytes read + written; bf16 matmul 680 TFLOP/s through cuBLAS at 8192^3. A candidate faster
# than bytes/bandwidth (or flops/rate) would beat physics, so it is flagged.
H200_COPY_BYTES_PER_S = 4.25e12
H200_BF16_FLOPS_PER_S = 680e12
# The datasheet peaks (H200 SXM: 4.8 TB/s HBM3e, 989 TFLOP/s dense bf16) bound what is physically
# possible. The measured ceilings above are not bounds: cuBLAS ran 6% past the 8192^3 rate at
# 4096^3 in our runs (docs/benchmarks.md), so "faster than physics" is judged on the peaks.
H200_PEAK_BYTES_PER_S = 4.8e12
H200_PEAK_BF16_FLOPS_PER_S = 989e12


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as e:
        raise UsageError(f"environment variable {name}={raw!r}: expected a number") from e


def default_cache_dir() -> Path:
    raw = os.environ.get("KLINEAGE_CACHE_DIR")
    if raw:
        return Path(raw)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "klineage"


class GateConfig(BaseModel):
    """How strictly and how long the gate checks a candidate."""

    trials: int = Field(default=5, ge=5, description="random trials per regime (>= 5)")
    # A regime whose one case (inputs and outputs) is over large_case_bytes gets large_trials
    # random trials instead (every variant beyond get_inputs is kept; gate/reference.py).
    large_case_bytes: int = Field(default=64 * 2**20, ge=0)
    large_trials: int = Field(default=2, ge=2)
    tolerances: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    timeout_s: float = Field(default=120.0, gt=0, description="wall time of one gate call")
    # Added to timeout_s for each autotune config beyond the first (each is built and checked;
    # gate/checker.py), so a config space is not mistaken for a hang.
    timeout_per_config_s: float = Field(default=10.0, ge=0)
    seed: int = 0
    allow_suspicious: bool = False
    # More than this many times faster than eager PyTorch (and than torch.compile, where it was
    # timed) is flagged as suspicious.
    max_speedup_vs_reference: float = 10.0
    # ... and the candidate runs at this fraction of the floor's speed or faster: a reference far
    # from the floor (eager's dim-0 softmax in fp16 at 0.12%) is beaten further by sound kernels.
    suspicious_floor_fraction: float = Field(default=0.5, ge=0, le=1)
    copy_bytes_per_s: float = H200_COPY_BYTES_PER_S
    matmul_flops_per_s: float = H200_BF16_FLOPS_PER_S
    peak_bytes_per_s: float = H200_PEAK_BYTES_PER_S
    peak_flops_per_s: float = H200_PEAK_BF16_FLOPS_PER_S
    # Timing (gate/devtime.py, gate/profile.py): rounds interleave the candidate with its base
    # (A B B A ...); each round takes this many samples of about 1 ms of calls each.
    timing_rounds: int = Field(default=5, ge=2, le=20)
    timing_samples: int = Field(default=3, ge=1, le=20)
    # A candidate's autotune table is a config space: each config (at most this many) is timed
    # once per regime, and the fastest is timed side by side (gate/profile.py: sweep).
    configs_per_call: int = Field(default=16, ge=1, le=256)
    # What decisions use: "device" (CUDA-graph replay, the kernels alone) or "host" (eager
    # launches: what a Python caller pays, launch path included). Both are always recorded.
    time_basis: Literal["device", "host"] = "device"
    # A regime is launch-bound when its roofline floor is under this many microseconds, or the
    # kernels' device time is within launch_bound_factor x an empty launch: correctness only,
    # never evidence for a speedup.
    launch_bound_floor_us: float = Field(default=3.0, ge=0)
    launch_bound_factor: float = Field(default=4.0, ge=0)
    # Busy time on the GPU right before the profile stage (gate/profile.py: spin_up_gpu).
    spin_up_ms: float = Field(default=300.0, ge=0)
    profile_compile: bool = True
    cache: bool = True  # verdicts served by content (gate/cache.py)
    # The reference's cases and baseline times reused by later calls on the same problem
    # (gate/refcache.py); `--no-cache` and KLINEAGE_NO_CACHE turn both off.
    reference_cache: bool = True

    @field_validator("tolerances")
    @classmethod
    def _tolerances_bounded(cls, v: dict[str, float]) -> dict[str, float]:
        for dtype, tol in v.items():
            if not 0 < tol <= MAX_TOLERANCE:
                raise ValueError(
                    f"tolerance for {dtype} is {tol}: must be in (0, {MAX_TOLERANCE}] "
                    "(looser lets wrong half-precision kernels pass)"
                )
        return v

    @classmethod
    def from_env(cls) -> GateConfig:
        caches = os.environ.get("KLINEAGE_NO_CACHE", "") in ("", "0")
        return cls(
            trials=int(_env_float("KLINEAGE_TRIALS", 5)),
            timeout_s=_env_float("KLINEAGE_TIMEOUT", 120.0),
            copy_bytes_per_s=_env_float("KLINEAGE_COPY_BYTES_PER_S", H200_COPY_BYTES_PER_S),
            matmul_flops_per_s=_env_float("KLINEAGE_MATMUL_FLOPS_PER_S", H200_BF16_FLOPS_PER_S),
            cache=caches,
            reference_cache=caches,
            time_basis="host" if os.environ.get("KLINEAGE_TIME") == "host" else "device",
            configs_per_call=int(_env_float("KLINEAGE_CONFIGS_PER_CALL", 16)),
        )

    def tolerance_for(self, dtype: str) -> float:
        return self.tolerances.get(dtype, DEFAULT_TOLERANCES["float32"])


@contextmanager
def env_scope(**variables: str | None) -> Iterator[None]:
    """Set (or unset, with None) environment variables for the duration of a block (tests)."""
    saved = {k: os.environ.get(k) for k in variables}
    try:
        for k, v in variables.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old
