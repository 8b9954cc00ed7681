"""What the parent asks of the child process, and the events the child sends back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from klineage.config import GateConfig
from klineage.gate.records import Environment, Stage, StageResult, Status


class GateRequest(BaseModel):
    problem: str
    candidate: str
    device: str = "cpu"
    regimes: list[str] = Field(default_factory=list)
    overrides: dict[str, Any] = Field(default_factory=dict)
    config: GateConfig = Field(default_factory=GateConfig)


class EventWriter:
    """Append-only JSON lines, flushed per event, so a crash keeps everything sent before it."""

    def __init__(self, path: Path) -> None:
        self._f = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives with the process

    def _write(self, obj: dict[str, Any]) -> None:
        self._f.write(json.dumps(obj, default=str) + "\n")
        self._f.flush()

    def start(self, stage: Stage, detail: str = "") -> None:
        self._write({"type": "start", "stage": stage.value, "detail": detail})

    def stage(self, result: StageResult) -> None:
        self._write({"type": "stage", "result": result.model_dump(mode="json")})

    def environment(self, env: Environment) -> None:
        self._write({"type": "environment", "env": env.model_dump(mode="json")})

    def progress(self, detail: str) -> None:
        self._write({"type": "progress", "detail": detail})

    def done(self) -> None:
        self._write({"type": "done"})


def read_events(path: Path) -> list[dict[str, Any]]:
    """Events written so far; a torn last line (the child died mid-write) is dropped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def failed(stage: Stage, message: str, **numbers: Any) -> StageResult:
    return StageResult(stage=stage, status=Status.FAILED, message=message, numbers=numbers)


def passed(stage: Stage, message: str, **numbers: Any) -> StageResult:
    return StageResult(stage=stage, status=Status.PASSED, message=message, numbers=numbers)
