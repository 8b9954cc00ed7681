"""What a gate call is asked to do, and the constructors of stage results."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from klineage.config import GateConfig
from klineage.gate.records import Stage, StageNumbers, StageResult, Status

# A progress event's payload: display data for a caller's progress lines (the CLI's status and
# bars, KLINEAGE_EVENTS=stderr), its keys by kind of event. Never stored and never decided on, so
# no model of its own; read-only, so a callback cannot change what the caller goes on to use.
# Values stay Any because the printers format them as they come.
Event = Mapping[str, Any]
# Progress events of a gate call ({"type": "start" | "progress", ...}) for a caller to show.
EventCallback = Callable[[Event], None]


class GateRequest(BaseModel):
    problem: str
    candidate: str
    device: str = "cpu"
    regimes: list[str] = Field(default_factory=list)
    overrides: dict[str, Any] = Field(default_factory=dict)
    config: GateConfig = Field(default_factory=GateConfig)
    # A kernel already accepted for this problem (the walk's parent, optimize's best so far):
    # on a GPU it is timed beside the candidate, in its own harness, for side-by-side ratios.
    base: str | None = None


def failed(stage: Stage, message: str) -> StageResult:
    return StageResult(stage=stage, status=Status.FAILED, message=message)


def passed(stage: Stage, message: str, numbers: StageNumbers | None = None) -> StageResult:
    return StageResult(
        stage=stage,
        status=Status.PASSED,
        message=message,
        numbers=numbers if numbers is not None else StageNumbers(),
    )
