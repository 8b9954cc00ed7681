"""The store's rows as the library reads them back: one dataclass per table, JSON columns
decoded (store/db.py and store/runs.py build them; nothing else writes them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class LineageRow:
    id: str
    problem_path: str
    expert_path: str
    device: str
    policy: str
    regimes: list[str]
    status: str
    stop_reason: str
    environment: dict[str, Any] | None
    created: str
    updated: str


@dataclass
class NodeRow:
    id: int
    lineage_id: str
    step: int
    parent_id: int | None
    via_attempt: int | None
    source: str
    gate: dict[str, Any]


@dataclass
class AttemptRow:
    id: int
    parent_id: int
    step: int
    pass_name: str
    site_key: str
    site: dict[str, Any]
    applied: bool
    accepted: bool
    reason: str
    failed_stage: str | None
    message: str
    candidate: str | None
    gate: dict[str, Any] | None
    seconds: float


@dataclass
class ProbeRow:
    lineage_id: str
    step: int
    pass_name: str
    base_node: int
    applied: bool
    accepted: bool
    failed_stage: str | None
    message: str
    candidate: str | None
    gate: dict[str, Any] | None
    seconds: float
    # A forward-only pass (no step removes it) added to the simplest kernel, stored at the
    # simplest kernel's step; False: the step's own optimization added back.
    forward_only: bool = False
    # The kernel a forward-only pass was added to when the simplest kernel has no place for it
    # (the family's naive kernel); None: the simplest kernel (base_node's).
    base_source: str | None = None

    @classmethod
    def pending(
        cls, lineage_id: str, step: int, pass_name: str, base_node: int, forward_only: bool = False
    ) -> ProbeRow:
        """A probe not gated yet: nothing applied, no message."""
        return cls(
            lineage_id,
            step,
            pass_name,
            base_node,
            applied=False,
            accepted=False,
            failed_stage=None,
            message="",
            candidate=None,
            gate=None,
            seconds=0.0,
            forward_only=forward_only,
        )


@dataclass
class SkillRow:
    id: str
    pass_name: str
    anchor: str
    record: dict[str, Any]
    confidence: int


@dataclass
class RunRow:
    id: str
    problem_path: str
    kernel_path: str
    device: str
    policy: str
    settings: dict[str, Any]
    status: str
    stop_reason: str
    start_gate: dict[str, Any] | None
    summary: dict[str, Any] | None
    created: str
    updated: str


@dataclass
class TrialRow:
    id: int
    run_id: str
    seq: int
    proposal: str
    label: str
    skill_id: str | None
    materializer: str
    base_sha: str
    candidate: str | None
    candidate_sha: str | None
    gated: bool
    accepted: bool
    kept: bool
    failed_stage: str | None
    message: str
    gate: dict[str, Any] | None
    speedup: float | None
    predicted: float | None
    tokens_in: int
    tokens_out: int
    reply: str | None
    seconds: float
