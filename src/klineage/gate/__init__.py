"""The gate: the source of truth on whether a candidate kernel is correct and how fast it is."""

from klineage.gate.records import Environment, GateResult, RegimeOutcome, Stage, StageResult, Status
from klineage.gate.runner import run_gate

__all__ = [
    "Environment",
    "GateResult",
    "RegimeOutcome",
    "Stage",
    "StageResult",
    "Status",
    "run_gate",
]
