"""Memory-based baselines, built from forward rollouts on the training workloads.

A rollout is an optimize run of the no-knowledge `random` policy on a corpus naive kernel (the
same loop, gate and budget). From the trials of those runs:

- AdaExplore-style: failure rules "you cannot ..." distilled from the gate's rejections, one per
  (pass, failing stage), injected once seen at least `min_count` times. Mechanically the policy
  explores passes in random order and skips a pass a rule forbids; with an LLM the rules go into
  the prompt of a free refinement.
- AccelOpt-style: a memory of slow -> fast kernel pairs (the kept trials) with the insight drawn
  from each ("adding X to the Y kernel made it 1.4x faster"). Mechanically the policy tries
  passes in order of their remembered gain (conditions unknown), then the rest; with an LLM the
  best insights, and the best pair's diff, go into the prompt.

Both know what worked or failed before, but not when (no conditions), which is the difference
klineage's skills are meant to make.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from klineage.metrics import geomean
from klineage.optimize.policies import (
    Context,
    Proposal,
    pass_proposal,
    register_policy,
    shuffled_passes,
)
from klineage.store import Store


@dataclass
class FailureRule:
    pass_name: str
    stage: str
    count: int
    example: str  # the first rejection's message, first line

    @property
    def text(self) -> str:
        return (
            f"You cannot add {self.pass_name} blindly: the gate rejected it {self.count} time(s) at "
            f"{self.stage} ({self.example[:160]})."
        )


@dataclass
class Pair:
    pass_name: str
    workload: str
    speedup: float
    insight: str
    diff: str  # slow -> fast, unified diff (truncated)


@dataclass
class Memory:
    rules: list[FailureRule] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    min_count: int = 2
    sources: list[str] = field(default_factory=list)  # the rollout runs it was built from

    def active_rules(self) -> list[FailureRule]:
        return [r for r in self.rules if r.count >= self.min_count]

    def gain(self, pass_name: str) -> float | None:
        xs = [p.speedup for p in self.pairs if p.pass_name == pass_name]
        return geomean(xs)

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Memory:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(
            [FailureRule(**r) for r in d["rules"]],
            [Pair(**p) for p in d["pairs"]],
            d["min_count"],
            d["sources"],
        )


def build_memory(store: Store, workloads: set[str] | None = None, min_count: int = 2) -> Memory:
    """From every finished `random`-policy run in `store` (on the given workloads, if named)."""
    fails: dict[tuple[str, str], list[str]] = defaultdict(list)
    pairs: list[Pair] = []
    sources: list[str] = []
    for run in store.list_runs():
        workload = Path(run.problem_path).parent.name
        if (
            run.policy != "random"
            or run.status != "done"
            or (workloads and workload not in workloads)
        ):
            continue
        sources.append(run.id)
        base: dict[str, str] = {}
        for t in store.trials(run.id):
            name = t.proposal.removeprefix("pass:")
            if t.gated and not t.accepted:
                fails[(name, t.failed_stage or "gate")].append(
                    (t.message or "").splitlines()[0] if t.message else ""
                )
            if t.kept and t.speedup and t.candidate:
                before = base.get(t.base_sha, "")
                diff = "".join(
                    difflib.unified_diff(before.splitlines(True), t.candidate.splitlines(True), n=1)
                )[:3000]
                pairs.append(
                    Pair(
                        name,
                        workload,
                        float(t.speedup),
                        f"adding {name} to the {workload} kernel made it {t.speedup:.2f}x faster",
                        diff,
                    )
                )
            if t.candidate_sha and t.candidate:
                base[t.candidate_sha] = t.candidate
    rules = [FailureRule(p, s, len(m), m[0]) for (p, s), m in sorted(fails.items())]
    return Memory(rules, pairs, min_count, sources)


def _memory(ctx: Context) -> Memory:
    m = ctx.memory
    return m if isinstance(m, Memory) else Memory()


def _llm_refinements(tag: str, what: str, notes: str) -> Iterator[Proposal]:
    """Free LLM refinements with the memory in the prompt, until the budget stops the loop."""
    i = 0
    while True:
        i += 1
        yield Proposal(
            key=f"{tag}-llm:{i}",
            label=f"LLM refinement {i} with {what}",
            materializer="llm",
            notes=notes,
        )


@register_policy("adaexplore")
class AdaExploreStyle:
    name, knowledge = "adaexplore", "memory"

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        mem = _memory(ctx)
        banned = {r.pass_name for r in mem.active_rules()}
        rules = "\n".join(f"- {r.text}" for r in mem.active_rules())
        if ctx.llm:
            yield from _llm_refinements("adaexplore", "failure rules", rules)
        for n in shuffled_passes(ctx):
            if n not in banned:
                yield pass_proposal(ctx, n)


@register_policy("accelopt")
class AccelOptStyle:
    name, knowledge = "accelopt", "memory"

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        mem = _memory(ctx)
        if ctx.llm:
            best = sorted(mem.pairs, key=lambda p: -p.speedup)[:5]
            notes = "\n".join(f"- {p.insight}" for p in best)
            if best:
                notes += (
                    f"\n\nThe best remembered slow -> fast change:\n```diff\n{best[0].diff}\n```"
                )
            yield from _llm_refinements("accelopt", "slow->fast memory", notes)
        # Remembered gains first; the rest in the seeded random order (the sort is stable).
        ranked = sorted(shuffled_passes(ctx), key=lambda n: -(mem.gain(n) or 0.0))
        for n in ranked:
            yield pass_proposal(ctx, n, mem.gain(n))
