"""What an optimize run returns and stores: its summary, a fixed shape (TypedDicts, so that the
JSON the store keeps, `klineage optimize --json` prints and bench rows copy stays a plain dict,
key for key as before)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict


class RegimeSummary(TypedDict):
    """One timed regime: the starting kernel against the best one (two gate calls' medians)."""

    start_ms: float
    best_ms: float
    speedup: float
    launch_bound: bool
    status: str  # metrics.Speedup.status ("measured", "within noise", ...) or "not measured"
    vs_eager: float | None
    vs_compile: float | None
    pct_of_floor: float | None


class AppliedTrial(TypedDict):
    """A kept trial: what was applied, how, and what it gained (measured or predicted)."""

    seq: int
    proposal: str
    label: str
    materializer: str
    speedup: float | None
    predicted: float | None
    message: str


class RunSummary(TypedDict):
    run_id: str
    problem: str
    kernel: str
    device: str
    policy: str
    llm: str | None
    stop_reason: str
    measured: bool
    label: str  # "measured" or "predicted, not measured"
    gate_calls: int
    budget: int
    tokens: int
    trials: int
    applied: list[AppliedTrial]
    speedup: float | None  # geomean over the regimes that are not launch-bound, when measured
    predicted: float | None  # the kept skills' predicted gains multiplied, when not measured
    regimes: dict[str, RegimeSummary]
    curve: list[tuple[int, float]]  # (gate calls, speedup of the best so far over the start)
    best_source: str
    # The best kernel's gate Environment as JSON ({} when none was recorded), copied into bench
    # rows unchanged: its shape is gate.records.Environment's.
    environment: Mapping[str, object]
