"""A stored lineage, read back for display and JSON: the chain expert -> ... -> simplest, every
attempt with its verdict, and its forward probes (lineage/probe.py) with theirs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from klineage.gate.records import GateJSON, Status, regime_outcomes
from klineage.metrics import inverse, speedups
from klineage.store import Store
from klineage.store.db import LineageRow, StoreError


def _held_regimes(gate: GateJSON | None) -> list[str]:
    return [r.regime for r in regime_outcomes(gate) if r.status is Status.PASSED]


class StepJSON(TypedDict):
    """A StepView as JSON (`klineage lineage show --json`, the MCP lineage tool)."""

    step: int
    rewrite: str
    site: str
    description: str
    function: str
    line: int
    applied: bool
    accepted: bool
    chosen: bool
    stage: str | None
    message: str
    reason: str
    held_regimes: list[str]
    speedup: dict[str, float]


class ProbeJSON(TypedDict):
    """One forward probe: a step's optimization (or, forward_only, a pass no step removes)
    added to the walk's simplest kernel (onto "simplest") or, for a forward-only pass with no
    place there, to the family's naive kernel ("naive"); message says why it did not apply or
    was rejected."""

    step: int
    rewrite: str
    forward_only: bool
    onto: str
    applied: bool
    accepted: bool
    stage: str | None
    message: str


class LineageJSON(TypedDict):
    """A LineageView as JSON: the lineage's row, every attempt (steps) and the chosen chain."""

    id: str
    problem: str
    expert: str
    device: str
    policy: str
    status: str
    stop_reason: str
    # The gate Environment the walk ran in, as stored (gate.records.Environment's shape), or None.
    environment: Mapping[str, object] | None
    effects: str  # "measured" or "not measured (no GPU)"
    steps: list[StepJSON]
    path: list[StepJSON]
    probes: list[ProbeJSON]


@dataclass
class StepView:
    step: int
    rewrite: str
    site: str
    description: str
    function: str
    line: int
    applied: bool
    accepted: bool
    chosen: bool
    stage: str | None
    message: str
    reason: str
    held_regimes: list[str] = field(default_factory=list)
    # Per regime: child time / parent time, i.e. what the optimization buys (> 1 = it helps).
    speedup: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> StepJSON:
        return StepJSON(
            step=self.step,
            rewrite=self.rewrite,
            site=self.site,
            description=self.description,
            function=self.function,
            line=self.line,
            applied=self.applied,
            accepted=self.accepted,
            chosen=self.chosen,
            stage=self.stage,
            message=self.message,
            reason=self.reason,
            held_regimes=self.held_regimes,
            speedup=self.speedup,
        )


@dataclass
class LineageView:
    lineage: LineageRow
    steps: list[StepView]
    path: list[StepView]
    sources: list[str]
    probes: list[ProbeJSON] = field(default_factory=list)

    def as_json(self) -> LineageJSON:
        lin = self.lineage
        measured = any(s.speedup for s in self.path)
        return {
            "id": lin.id,
            "problem": lin.problem_path,
            "expert": lin.expert_path,
            "device": lin.device,
            "policy": lin.policy,
            "status": lin.status,
            "stop_reason": lin.stop_reason,
            "environment": lin.environment,
            "effects": "measured" if measured else "not measured (no GPU)",
            "steps": [s.as_json() for s in self.steps],
            "path": [s.as_json() for s in self.path],
            "probes": self.probes,
        }


def load_view(store: Store, lid: str) -> LineageView:
    lin = store.get_lineage(lid)
    if lin is None:
        raise StoreError(
            f"no lineage {lid!r} in {store.path}; `klineage lineage list` shows the stored ones"
        )
    nodes = store.nodes(lin.id)
    by_id = {n.id: n for n in nodes}
    chosen = {n.via_attempt for n in nodes if n.via_attempt is not None}
    steps = []
    for a in store.attempts(lin.id):
        parent = by_id.get(a.parent_id)
        speed: dict[str, float] = {}
        if a.accepted and a.gate is not None and parent is not None:
            # child / parent time: the child was timed beside its parent (metrics.speedups).
            speed = {r: inverse(x).value for r, x in speedups(parent.gate, a.gate).items()}
        steps.append(
            StepView(
                step=a.step,
                rewrite=a.pass_name,
                site=a.site_key,
                description=a.site.get("description", ""),
                function=a.site.get("function", ""),
                line=int(a.site.get("line", 0)),
                applied=a.applied,
                accepted=a.accepted,
                chosen=a.id in chosen,
                stage=a.failed_stage,
                message=a.message,
                reason=a.reason,
                held_regimes=_held_regimes(a.gate) if a.accepted else [],
                speedup=speed,
            )
        )
    path = [s for s in steps if s.chosen]
    probes = [
        ProbeJSON(
            step=p.step,
            rewrite=p.pass_name,
            forward_only=p.forward_only,
            onto="naive" if p.base_source else "simplest",
            applied=p.applied,
            accepted=p.accepted,
            stage=p.failed_stage,
            message=p.message,
        )
        for p in store.probes(lin.id)
    ]
    return LineageView(lin, steps, path, [n.source for n in nodes], probes)
