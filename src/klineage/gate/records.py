"""The gate's records: what each stage found, and the environment every number came from."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


class Stage(StrEnum):
    """Gate stages in the order they run."""

    LOAD = "load"
    STATIC_GUARDS = "static_guards"
    COMPILE = "compile"
    RUNTIME_GUARDS = "runtime_guards"
    CORRECTNESS = "correctness"
    PROFILE = "profile"


STAGE_ORDER: tuple[Stage, ...] = tuple(Stage)


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    # The stage did not run because an earlier one failed.
    SKIPPED = "skipped"
    # The stage cannot measure on this device (profile on the CPU); never a made-up number.
    NOT_MEASURED = "not_measured"


class Fault(StrEnum):
    """Whose file a rejection is charged to: the CLI exits 1 for the candidate, 2 for the problem."""

    CANDIDATE = "candidate"
    PROBLEM = "problem"


class Environment(BaseModel):
    """Where a result was obtained. Every effect and benchmark row carries one."""

    device: str
    gpu_name: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str
    triton: str
    klineage: str
    python: str
    interpreter: bool
    timing_method: str
    date: str

    def fingerprint(self) -> dict[str, Any]:
        """The fields that change a result (the date does not)."""
        return self.model_dump(exclude={"date"})


class RegimeOutcome(BaseModel):
    """Correctness (and, on a GPU, timing) of one regime."""

    regime: str
    status: Status
    message: str = ""
    trials: int = 0
    dtype: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    tolerance: float | None = None
    # What decided the regime's floating outputs (gate/compare.py), the loosest over its cases:
    # "reference" (the tolerance of the reference's own output), "float64" (of the reference
    # evaluated in float64) or "float64+torch_error" (a multiple of PyTorch's own error too).
    criterion: str | None = None
    configs_checked: int = 1
    # The Triton kernels the candidate launched on this regime (by function name): which code a
    # timing of this regime exercised.
    kernels: list[str] = Field(default_factory=list)


class StageResult(BaseModel):
    stage: Stage
    status: Status
    message: str = ""
    numbers: dict[str, Any] = Field(default_factory=dict)
    regimes: list[RegimeOutcome] = Field(default_factory=list)
    seconds: float = 0.0


class GateResult(BaseModel):
    """The verdict on one candidate: accepted only if every stage that ran passed."""

    problem: str
    candidate: str
    device: str
    regimes: list[str] = Field(default_factory=list)
    accepted: bool
    stages: list[StageResult]
    environment: Environment | None = None
    cache_key: str = ""
    cached: bool = False
    seconds: float = 0.0
    # Set when rejected: whose fault it is. A problem fault is not a verdict on the candidate.
    fault: Fault | None = None
    # How the candidate and the problem ran (gate/sandbox.py: bwrap, uid or process) and what
    # that level does and does not promise.
    isolation: str = ""
    # Calls of the candidate's forward whose outputs were compared, all regimes together.
    calls_checked: int = 0
    # Rejected because the time ran out: not cached, since it may be the machine's load.
    timed_out: bool = False

    @property
    def failed_stage(self) -> Stage | None:
        for s in self.stages:
            if s.status is Status.FAILED:
                return s.stage
        return None

    @property
    def message(self) -> str:
        """The first failure's message, or a one-line summary when accepted."""
        for s in self.stages:
            if s.status is Status.FAILED:
                return f"{s.stage.value}: {s.message}"
        return "accepted"

    def stage(self, stage: Stage) -> StageResult | None:
        for s in self.stages:
            if s.stage is stage:
                return s
        return None
