"""Policies: what the optimize loop tries next. All share the loop, the gate and the budget.

- klineage (default): skills retrieved for the target with their conditions (the "when"),
  best predicted first; each materialized mechanically where its pass finds a site, by the LLM
  otherwise (when one is given). A trial faster on some regimes only is followed by a regime
  dispatch: both kernels in one file, each where it was measured faster.
- what-only: the same skills with their conditions ignored (what an agent that knows the
  optimizations but not when they pay would try), ordered by their typical gain.
- random: no knowledge, mechanical: every registered pass in a seeded random order, with the
  pass's default parameters.
- llm-feedback: no knowledge, LLM: "make it faster" from the kernel and the gate's feedback.

A policy yields Proposals lazily; the loop asks for the next one after the previous is gated,
so a policy can look at the current best kernel (`ctx.best_source`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from klineage.rewrite import all_passes
from klineage.skills.model import Skill


@dataclass
class Proposal:
    key: str  # stable across a replay: what was proposed and how
    label: str
    materializer: str  # "mechanical" or "llm"
    skill: Skill | None = None
    pass_name: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    # Predicted speedup on the target (best over its regimes); None when unknown.
    predicted: float | None = None
    notes: str = ""  # extra knowledge for an LLM prompt (a memory's rules or insights)
    what: str = ""  # the label without the policy's note on why now ("" when label is all)
    # Passes applied after this one's, in order, to make one candidate (mechanical only): a
    # rewrite whose gain needs another's (optimize/structural.py `structural_proposals`).
    then: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # The kernel the rewrite applies to when it is not the best so far ("" for the best): an
    # alternative to a structural rewrite kept before it (structural.py). It is still
    # gated beside the best and kept only if faster than it.
    source: str = ""


@dataclass
class Context:
    problem: Path
    kernel: Path
    device: str
    skills: list[Skill]
    llm: bool
    seed: int
    target: dict[str, dict[str, float]]  # regime -> shape features
    capability: str | None = None
    best_source: str = ""
    last_accepted: bool = False  # whether the last proposal's candidate passed the gate
    memory: Any = None  # a bench.memory.Memory for the memory-based baselines
    shapes: dict[str, list[list[int]]] = field(default_factory=dict)  # regime -> input shapes
    # Configs one tunables proposal may carry: the gate's configs_per_call on a GPU (each is
    # timed); CPU_CONFIGS on the CPU, where each is only checked, in the interpreter.
    configs: int = 16
    # The best kernels so far (sha of the source) -> measured speedup over the start: what a
    # kept rewrite gained, for judging an alternative to it (1.0 where nothing is measured).
    gains: dict[str, float] = field(default_factory=dict)
    # The trial just gated, correct, with its per-regime ratios (GPU only; None otherwise): what
    # a regime dispatch reads (optimize/dispatch.py).
    last_trial: Any = None


CPU_CONFIGS = 2

TABLE_SHARE = 2.0
"""The seconds a tunables table's correctness sweep may take, in units of the gate call's
timeout. The gate checks every config on every case of every regime, so a table of k configs
costs about k times the start's correctness stage: on the reverse cumsum's 84M-element regimes
(35 calls, 36 s on the H200) a 16-config table is ~560 calls, nine minutes for one gate call."""


def table_size(configs_per_call: int, timeout_s: float, start_gate: dict[str, Any]) -> int:
    """Configs one tunables proposal carries: configs_per_call, fewer where the start's own
    correctness stage says that many would not be checked in TABLE_SHARE x the call's timeout
    (two at least: a table of one is not a search)."""
    seconds = next(
        (
            float(s.get("seconds") or 0.0)
            for s in start_gate.get("stages", [])
            if s.get("stage") == "correctness"
        ),
        0.0,
    )
    if seconds <= 0.0:
        return configs_per_call
    return max(2, min(configs_per_call, int(TABLE_SHARE * timeout_s / seconds)))


class Policy(Protocol):
    name: str
    knowledge: str  # "when" | "what" | "none" | "memory"

    def proposals(self, ctx: Context) -> Iterator[Proposal]: ...


POLICIES: dict[str, Callable[[], Policy]] = {}


def register_policy(name: str) -> Callable[[Callable[[], Policy]], Callable[[], Policy]]:
    def deco(factory: Callable[[], Policy]) -> Callable[[], Policy]:
        POLICIES[name] = factory
        return factory

    return deco


def policy_names() -> list[str]:
    import klineage.bench.memory  # noqa: F401 - registers the memory-based baselines

    return list(POLICIES)


def get_policy(name: str) -> Policy:
    from klineage.errors import UsageError

    policy_names()
    if name not in POLICIES:
        raise UsageError(f"--policy {name}: expected one of {', '.join(POLICIES)}")
    return POLICIES[name]()


def tuning_proposals(ctx: Context, *, prior: bool) -> Iterator[Proposal]:
    """The kernel's launch constants lifted into a table of ctx.configs configs (the gate
    sweeps it; GPU only): with prior, the configs nearest to the experts' (optimize/configs.py);
    without, drawn at random from the same space."""
    from klineage.optimize.configs import expert_configs, nearest_configs, scans
    from klineage.rewrite.launches import analyse, draw

    if ctx.device != "cuda":
        return  # nothing is timed on the CPU: a space has nothing to choose by
    experts = expert_configs(ctx.skills) if prior else []
    # Launches with one space (split_online's stats and write kernels: the same sizes, warps,
    # stages) share one table in one gate call, and the label names each kernel it tables.
    groups: dict[str, tuple[list[dict[str, int]], list[Any]]] = {}
    for launch in analyse(ctx.best_source):
        space = launch.space() if not launch.problem else []
        if len(space) >= 2:
            groups.setdefault(repr(space), (space, []))[1].append(launch)
    for space, same in groups.values():
        launch, kernels = same[0], [x.kernel for x in same]
        if prior:
            dot = "tl.dot" in ctx.best_source
            configs, note = nearest_configs(
                launch, experts, ctx.configs, dot=dot, space=space, scan=scans(ctx.best_source)
            )
        else:
            configs, note = (
                draw(space, ctx.configs, _seed(ctx)),
                f"drawn at random from {len(space)}",
            )
        what = f"tunables of {' and '.join(kernels)} ({len(configs)} configs)"
        yield Proposal(
            key=f"tunables:{'+'.join(kernels)}:{'prior' if prior else 'draw'}:{len(configs)}",
            label=f"{what}: {note}",
            materializer="mechanical",
            pass_name="tunables",
            params={"configs": configs, "kernels": kernels},
            what=what,
        )


def _seed(ctx: Context) -> str:
    return f"{ctx.seed}:{ctx.problem.parent.name}/{ctx.problem.name}"


def pass_proposal(ctx: Context, name: str, predicted: float | None = None) -> Proposal:
    """A registered pass with its defaults (a baseline's move); tunables draws its configs
    from the seed, ctx.configs of them."""
    params = {"count": ctx.configs, "seed": _seed(ctx)} if name == "tunables" else {}
    return Proposal(
        key=f"pass:{name}",
        label=name,
        materializer="mechanical",
        pass_name=name,
        params=params,
        predicted=predicted,
    )


def retrieved(ctx: Context, ignore_conditions: bool) -> list[Any]:
    """skills.retrieve on ctx.best_source: every skill, selected first, best predicted first."""
    from klineage.skills.retrieve import retrieve

    return retrieve(
        ctx.skills,
        ctx.problem,
        ctx.kernel,
        ctx.device,
        ctx.capability,
        llm=ctx.llm,
        source=ctx.best_source,
        target=ctx.target,
        ignore_conditions=ignore_conditions,
        shapes=ctx.shapes,
    )


def _skill_proposals(ctx: Context, ignore_conditions: bool) -> Iterator[Proposal]:
    """The retrieved skills on ctx.best_source, as proposals, but the structural ones: the
    selected, best predicted first, then (with conditions) those whose conditions predict no
    gain."""
    from klineage.skills.retrieve import structural as is_structural

    ranked = retrieved(ctx, ignore_conditions)
    tag = "what-only" if ignore_conditions else "skill"
    for r in ranked:
        if r.selected and not is_structural(r):
            yield skill_proposal(r, tag)
    if ignore_conditions:
        return
    # Budget left after every skill whose conditions hold: the budget is fixed, so the skills
    # that apply here but whose conditions predict no gain are tried last, in order of their
    # typical gain. Conditions rank; only the gate's measurement keeps (on the CPU nothing is
    # kept from here: the prediction is no gain).
    rest = [r for r in ranked if not r.selected and r.materializer and r.excluded == "measured"]
    typical = {id(r): _typical_gain(r.skill) for r in rest}
    for r in sorted(rest, key=lambda r: -typical[id(r)]):
        yield skill_proposal(r, "skill-explore", " [conditions predict no gain; budget left]")


def skill_proposal(r: Any, tag: str, note: str = "") -> Proposal:
    """A Proposal from a retrieval result (skills.retrieve.Retrieved)."""
    s = r.skill
    what = f"{s.name} ({s.anchor})"
    own = not r.pass_name or r.pass_name == s.rewrite.pass_name
    if (
        not own
    ):  # another form of the optimization (OTHER_FORMS): its own defaults, not the expert's
        what = f"{s.name} ({s.anchor}; written by {r.pass_name})"
    return Proposal(
        key=f"{tag}:{s.id}:{r.materializer}",
        label=what + note,
        materializer=r.materializer,
        skill=s,
        pass_name=s.rewrite.pass_name if own else r.pass_name,
        params=dict(s.rewrite.params) if own else {},
        predicted=r.score if r.predicted else None,
        what=what,
    )


def _typical_gain(skill: Skill) -> float:
    """The geomean of the effects that count (never old timing, launch-bound or noise)."""
    from klineage.metrics import geomean
    from klineage.skills.extract import trusted

    return geomean(e.speedup for e in skill.effects if e.speedup and trusted(e)) or 1.0


@register_policy("klineage")
class WhenAware:
    name, knowledge = "klineage", "when"

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        from klineage.optimize.structural import dispatching

        yield from dispatching(
            ctx, _structure_then_tuning(ctx, prior=True, ignore_conditions=False)
        )


@register_policy("what-only")
class WhatOnly:
    name, knowledge = "what-only", "what"

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        yield from _structure_then_tuning(ctx, prior=False, ignore_conditions=True)


def _structure_then_tuning(
    ctx: Context, *, prior: bool, ignore_conditions: bool
) -> Iterator[Proposal]:
    """The structural skills first, then the launch constants' table, then the rest. A kept
    table makes the launch autotuned with a grid of META, where the structural rewrites find no
    place (on the H200, 2026-12-02, the long-K matmul's tuned kernel had none for split_k, which
    made its naive kernel 2.8x faster in one step, do_bench 2026-12-01). The structure chosen,
    the table tunes its constants; the rest are retrieved again on the kernel that results."""
    from klineage.optimize.structural import structural_proposals

    yield from structural_proposals(ctx, ignore_conditions)
    yield from tuning_proposals(ctx, prior=prior)
    yield from _skill_proposals(ctx, ignore_conditions)


def shuffled_passes(ctx: Context) -> list[str]:
    """Every registered pass in an order drawn from the seed and the problem: one seed gives
    each problem its own order, so a bench over many problems samples random search instead
    of replaying one lucky (or unlucky) order everywhere. The problem is named by its folder
    and file, so the order is the same on every machine."""
    names = sorted(all_passes())
    random.Random(f"{ctx.seed}:{ctx.problem.parent.name}/{ctx.problem.name}").shuffle(names)
    return names


@register_policy("random")
class RandomPasses:
    name, knowledge = "random", "none"

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        for n in shuffled_passes(ctx):
            yield pass_proposal(ctx, n)


@register_policy("llm-feedback")
class LLMFeedback:
    name, knowledge = "llm-feedback", "none"

    def proposals(self, ctx: Context) -> Iterator[Proposal]:
        i = 0
        while True:  # the budget stops it
            i += 1
            yield Proposal(key=f"llm-free:{i}", label=f"LLM refinement {i}", materializer="llm")
