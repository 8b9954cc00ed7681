"""The Skill record: one optimization, reversed from an accepted lineage step.

Versioned: SCHEMA_VERSION changes when a field changes meaning; `klineage skills schema` writes
the JSON Schema (kept in the repo as schemas/skill.schema.json).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1


class Rewrite(BaseModel):
    """The executable forward rewrite: a registered pass and the parameters the expert used."""

    pass_name: str
    params: dict[str, Any] = Field(default_factory=dict)


class Exemplar(BaseModel):
    """The expert's own code: before (without the optimization), after (with it), unified diff."""

    before: str
    after: str
    diff: str


class Condition(BaseModel):
    """A predicate over a target, with the evidence it came from."""

    kind: str  # "static" (what the rewrite needs in the code or hardware) or "measured"
    predicate: str  # human-readable, e.g. "code has: tl.load / tl.store in a kernel"
    evidence: str
    # A learned threshold on a regime's shape feature (row_length, rows, elements), when one
    # separates the regimes where the effect paid off from those where it did not.
    feature: str | None = None
    op: str | None = None  # "<=" or ">="
    threshold: float | None = None
    source_problem: str | None = None

    def holds(self, feats: dict[str, float]) -> bool | None:
        """Whether a threshold condition holds for a regime's features; None if not a threshold."""
        if self.feature is None or self.threshold is None or self.feature not in feats:
            return None
        v = feats[self.feature]
        return v <= self.threshold if self.op == "<=" else v >= self.threshold


class Effect(BaseModel):
    """A measured effect: the kernel without the optimization (base) vs with it (new)."""

    regime: str
    gpu: str | None = None
    arch: str | None = None
    dtype: str | None = None
    base_ms: float | None = None
    new_ms: float | None = None
    speedup: float | None = None  # base_ms / new_ms; None when not measured
    measured: bool
    environment: dict[str, Any] | None = None
    # Whether the rewritten code ran on this regime: False when the step changed a kernel the
    # candidate did not launch there (the "effect" is then timing noise); None when unknown.
    exercised: bool | None = None
    # Where it was measured: the lineage and step whose parent/child gate results gave it.
    lineage_id: str | None = None
    step: int | None = None
    # The kernel it was added to: "lineage" (the walk's kernel at that step, which still has
    # every optimization removed after it), "simplest" (a forward probe: added to the walk's
    # last kernel) or "naive" (a forward-only pass added to the family's naive kernel, where
    # the simplest kernel had no place for it). Optimize starts from simple kernels, so
    # retrieval takes a probe's effect over the lineage's own for the same lineage and regime.
    context: str = "lineage"
    # How the number was obtained (klineage/metrics.py): "measured" (clears its spread, not
    # launch-bound), "within noise", "launch-bound", or "old timing" (host-inclusive do_bench of
    # separate gate calls, before side-by-side device timing: never evidence). What counts as
    # evidence is decided in one place: skills/extract.py `pays`.
    status: str = "old timing"
    lo: float | None = None  # the speedup's range: per-round side-by-side ratios, or p20/p80
    hi: float | None = None
    side_by_side: bool = False
    basis: str | None = None  # "device" (CUDA-graph replay) or "host" (eager launches)


class FailureAvoided(BaseModel):
    """A simplification the gate rejected: what goes wrong without this optimization's care."""

    attempt: str  # pass and site of the rejected simplification
    stage: str | None
    message: str
    violated_assumption: str


class Provenance(BaseModel):
    source_kernel: str
    problem: str
    lineage_id: str
    step: int
    device: str
    tool_versions: dict[str, str] = Field(default_factory=dict)
    date: str


class Skill(BaseModel):
    schema_version: int = SCHEMA_VERSION
    id: str
    name: str
    intent: str
    category: str
    anchor: str
    rewrite: Rewrite
    exemplar: Exemplar
    conditions: list[Condition] = Field(default_factory=list)
    effects: list[Effect] = Field(default_factory=list)
    failures_avoided: list[FailureAvoided] = Field(default_factory=list)
    provenance: list[Provenance] = Field(default_factory=list)


class SkillSet(BaseModel):
    """What a JSON export holds: the skills and the schema version they follow."""

    schema_version: int = SCHEMA_VERSION
    skills: list[Skill]
