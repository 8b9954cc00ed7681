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
    # rewrite whose gain needs another's (optimize/policies.py `_structural_proposals`).
    then: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # The kernel the rewrite applies to when it is not the best so far ("" for the best): an
    # alternative to a structural rewrite kept before it (`_structural_proposals`). It is still
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
    from klineage.optimize.configs import expert_configs, nearest_configs
    from klineage.rewrite.launches import analyse, draw

    if ctx.device != "cuda":
        return  # nothing is timed on the CPU: a space has nothing to choose by
    experts = expert_configs(ctx.skills) if prior else []
    for launch in analyse(ctx.best_source):
        space = launch.space() if not launch.problem else []
        if len(space) < 2:
            continue
        if prior:
            dot = "tl.dot" in ctx.best_source
            configs, note = nearest_configs(launch, experts, ctx.configs, dot=dot, space=space)
        else:
            configs, note = (
                draw(space, ctx.configs, _seed(ctx)),
                f"drawn at random from {len(space)}",
            )
        what = f"tunables of {launch.kernel} ({len(configs)} configs)"
        yield Proposal(
            key=f"tunables:{launch.kernel}:{'prior' if prior else 'draw'}:{len(configs)}",
            label=f"{what}: {note}",
            materializer="mechanical",
            pass_name="tunables",
            params={"configs": configs},
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


def _retrieved(ctx: Context, ignore_conditions: bool) -> list[Any]:
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


def _structural_proposals(ctx: Context, ignore_conditions: bool) -> Iterator[Proposal]:
    """The selected structural skills, retrieved again on the best kernel each time one is
    kept: a structural rewrite changes what the others find and what their conditions read
    (column tiling turns 384 column programs into 3, where a split over rows is then what the
    GPU needs; split first, the tiling finds no place). Within one retrieval, the skills judged
    on the program count (RewritePass.BY_PROGRAMS) come after those that reshape the grid.

    A reshaping rewrite that was correct but not faster is followed by itself and, in the same
    candidate, the program-count skills its kernel now meets: on the H200 (2026-12-03) the
    tiled column max was 0.89x of the naive kernel alone (3 programs where there were 384),
    and the split over rows its few programs call for is what pays."""
    from klineage.rewrite import all_passes
    from klineage.skills.retrieve import structural as is_structural

    tag = "what-only" if ignore_conditions else "skill"
    passes = all_passes()

    def spreads(r: Any) -> bool:
        return passes[r.pass_name or r.skill.rewrite.pass_name].BY_PROGRAMS

    tried: set[str] = set()
    # Selected on a kernel a later structural rewrite replaced: (that kernel, the proposal).
    passed_over: list[tuple[str, Proposal]] = []
    while True:
        source = ctx.best_source
        ranked = [r for r in _retrieved(ctx, ignore_conditions) if r.selected and is_structural(r)]
        ranked.sort(key=spreads)
        fresh = [(r, _proposal(r, tag)) for r in ranked]
        fresh = [(r, p) for r, p in fresh if p.key not in tried]
        for i, (r, prop) in enumerate(fresh):
            tried.add(prop.key)
            yield prop
            kept = prop if ctx.best_source != source else None
            if kept is None and ctx.last_accepted and not spreads(r):
                for both in _with_spread(ctx, prop, ignore_conditions, spreads):
                    if both.key not in tried:
                        tried.add(both.key)
                        yield both
                        kept = both if ctx.best_source != source else None
                        break
            if kept is not None and _makes(kept, source) == ctx.best_source:
                # (not when a regime dispatch after it was kept instead: that is two kernels)
                yield from _values(ctx, kept, source, tried)
                passed_over += [(source, p) for _, p in fresh[i + 1 :]]
                break  # kept: what applies now is read from the new kernel
        if ctx.best_source != source:
            continue
        # Nothing structural left on the best kernel: a skill passed over when another was kept
        # before it, and not selected on the kernel that rewrite made, is tried on the kernel
        # it was selected on (an alternative, not a step after it). On the H200 (2026-12-02)
        # rows_per_program went first on the naive transpose (3.76x); the tiled transpose,
        # 14.3x on the same naive kernel, found no place in the multi-row kernel after it.
        for key, prop in _alternatives(ctx, passed_over, tried):
            tried.update((key, prop.key))
            yield prop
            if ctx.best_source != source:
                break
        if ctx.best_source == source:
            return


VALUE_STEPS = 2
"""Halvings (or doublings) of a kept structural rewrite's value a search measures in one
direction at most: the first that is not faster ends that direction."""


def _values(ctx: Context, kept: Proposal, before: str, tried: set[str]) -> Iterator[Proposal]:
    """After the structural rewrite `kept` was kept: the same rewrite of `before` with its
    structural value (RewritePass.scaled: split_k's split, multi_row's rows a program) halved,
    then doubled, each gated beside the kept kernel and kept only if faster. A direction that
    is faster goes one step further (VALUE_STEPS) and the other is not tried (one best value
    along the line is assumed). The default is a rule of thumb from one GPU and a few shapes;
    on an H100 the long-K matmul's best split was 256 where split_k's default gives 512, and
    the reverse cumsum's best rows a program 4 to 8 where multi_row's gave 64
    (docs/benchmarks.md, 2026-12-06)."""
    for factor in (0.5, 2.0):
        f, moved = factor, False
        for _ in range(VALUE_STEPS):
            n = _scaled(kept, f, before)
            if n is None or n.key in tried:
                break
            tried.add(n.key)
            yield n
            if _makes(n, before) != ctx.best_source:
                # not faster (or the regime dispatch after it was kept): no further this way
                break
            moved, f = True, f * factor
        if moved:
            return


def _makes(prop: Proposal, source: str) -> str | None:
    """The kernel prop's mechanical rewrite (its chain too) makes of source."""
    from klineage.optimize.materialize import mechanical

    if prop.materializer != "mechanical" or not prop.pass_name:
        return None
    return mechanical(source, prop.pass_name, prop.params, then=prop.then).source


def _scaled(prop: Proposal, factor: float, before: str) -> Proposal | None:
    """prop (its chain too) with each step's structural value `factor` times, applied to
    `before`; None where no step has one."""
    from dataclasses import replace

    from klineage.lineage.walk import sha

    passes = all_passes()
    steps = [(prop.pass_name or "", prop.params), *prop.then]
    out: list[tuple[str, dict[str, Any]]] = []
    scaled = False
    for name, params in steps:
        rp = passes.get(name)
        p = rp.scaled(dict(params), factor) if rp is not None else None
        scaled = scaled or p is not None
        out.append((name, p if p is not None else dict(params)))
    if not scaled:
        return None
    what = prop.what or prop.label
    times = f"{factor:g}x" if factor >= 1 else f"1/{1 / factor:g}"
    return replace(
        prop,
        key=f"{prop.key}*{factor:g}@{sha(before)[:12]}",
        label=f"{what} with {times} its structural value (split, rows a program): the kept "
        "default's neighbour, measured beside it",
        what=f"{what} ({times} its value)",
        pass_name=out[0][0],
        params=out[0][1],
        then=out[1:],
        source=before,
    )


def _alternatives(
    ctx: Context, passed_over: list[tuple[str, Proposal]], tried: set[str]
) -> Iterator[tuple[str, Proposal]]:
    """The passed-over proposals not tried since, as proposals on the kernel each was selected
    on; mechanical ones only, and only where its prediction there is unknown or more than the
    best kernel has gained over that kernel since (a known smaller gain cannot win). Yields
    (the key it was passed over with, the alternative)."""
    from dataclasses import replace

    from klineage.lineage.walk import sha

    now = ctx.gains.get(sha(ctx.best_source), 1.0)
    for earlier, prop in passed_over:
        if prop.key in tried or prop.materializer != "mechanical" or not prop.pass_name:
            continue
        since = now / ctx.gains.get(sha(earlier), 1.0)
        if prop.predicted is not None and prop.predicted <= since:
            continue
        what = prop.what or prop.label
        yield (
            prop.key,
            replace(
                prop,
                key=f"{prop.key}@{sha(earlier)[:12]}",
                label=f"{what} on the kernel before the structural rewrite kept after it was "
                f"selected (an alternative: no place for it or no predicted gain in the kept kernel, "
                f"{since:.2f}x faster since)",
                what=f"{what} (alternative)",
                source=earlier,
            ),
        )


def _with_spread(
    ctx: Context, prop: Proposal, ignore_conditions: bool, spreads: Callable[[Any], bool]
) -> Iterator[Proposal]:
    """`prop` then each program-count skill predicted to pay on the kernel it makes (mechanical
    rewrites only; nothing when the rewrite has no mechanical form here)."""
    from dataclasses import replace

    from klineage.metrics import PAYS_OFF
    from klineage.optimize.materialize import mechanical

    if prop.materializer != "mechanical" or not prop.pass_name:
        return
    made = mechanical(ctx.best_source, prop.pass_name, prop.params).source
    if made is None:
        return
    tag = "what-only" if ignore_conditions else "skill"
    for r in _retrieved(replace(ctx, best_source=made), ignore_conditions):
        if not (r.selected and spreads(r) and r.materializer == "mechanical"):
            continue
        if not (r.predicted and r.score >= PAYS_OFF):
            continue  # only where its condition says the new grid needs it
        second = _proposal(r, tag)
        yield replace(
            prop,
            key=f"{prop.key}+{second.key}",
            label=f"{prop.what or prop.label} + {second.what}: together, since its kernel meets "
            f"{r.skill.name}'s condition (predicted {r.score:.2f}x)",
            what=f"{prop.what or prop.label} + {second.what}",
            then=[*prop.then, (second.pass_name or "", second.params)],
            predicted=r.score,
        )


def _skill_proposals(ctx: Context, ignore_conditions: bool) -> Iterator[Proposal]:
    """The retrieved skills on ctx.best_source, as proposals, but the structural ones: the
    selected, best predicted first, then (with conditions) those whose conditions predict no
    gain."""
    from klineage.skills.retrieve import structural as is_structural

    ranked = _retrieved(ctx, ignore_conditions)
    tag = "what-only" if ignore_conditions else "skill"
    for r in ranked:
        if r.selected and not is_structural(r):
            yield _proposal(r, tag)
    if ignore_conditions:
        return
    # Budget left after every skill whose conditions hold: the budget is fixed, so the skills
    # that apply here but whose conditions predict no gain are tried last, in order of their
    # typical gain. Conditions rank; only the gate's measurement keeps (on the CPU nothing is
    # kept from here: the prediction is no gain).
    rest = [r for r in ranked if not r.selected and r.materializer and r.excluded == "measured"]
    typical = {id(r): _typical_gain(r.skill) for r in rest}
    for r in sorted(rest, key=lambda r: -typical[id(r)]):
        yield _proposal(r, "skill-explore", " [conditions predict no gain; budget left]")


def _proposal(r: Any, tag: str, note: str = "") -> Proposal:
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
        yield from _dispatching(
            ctx, _structure_then_tuning(ctx, prior=True, ignore_conditions=False)
        )


def _dispatching(ctx: Context, proposals: Iterator[Proposal]) -> Iterator[Proposal]:
    """`proposals`, each followed, where its trial was correct and faster than the best kernel
    on some regimes only, by the two kernels in one file, each where it was faster
    (optimize/dispatch.py): the "when" of that trial, measured on this problem, made code."""
    from klineage.optimize.dispatch import proposal

    made: set[str] = set()
    # A dispatch held back past the composite its trial's rewrite is followed by: (it, the best
    # kernel it was made against).
    held: tuple[Proposal, str] | None = None
    for prop in proposals:
        yield prop
        d = proposal(ctx.last_trial, ctx.best_source, ctx.shapes)
        if d is not None and d.key in made:
            d = None
        if d is not None:
            made.add(d.key)
        if d is None and held is not None and ctx.best_source == held[1]:
            d = held[0]  # the composite was not faster everywhere: the held dispatch now
        held = None
        if d is not None and _composite_follows(ctx, prop):
            # A reshaping rewrite faster only where its grid suits the shape (column tiling:
            # many columns) is followed by itself with the split its kernel needs elsewhere;
            # that first. On an H100 (2026-12-06) the column mean's tiling dispatched on its wide
            # regime was kept, and tiling + split_k (12.6x on the H200) was never proposed.
            held = (d, ctx.best_source)
            continue
        if d is not None:
            yield d


def _composite_follows(ctx: Context, prop: Proposal) -> bool:
    """Whether `_structural_proposals` follows prop's trial (accepted, not kept) by prop
    together with a program-count skill its kernel meets (`_with_spread`)."""
    from klineage.rewrite import all_passes

    view = ctx.last_trial
    if view is None or view.kept or not ctx.last_accepted or prop.then or prop.source:
        return False
    passes = all_passes()
    p = passes.get(prop.pass_name or "")
    if prop.materializer != "mechanical" or p is None or not p.STRUCTURAL or p.BY_PROGRAMS:
        return False

    def spreads(r: Any) -> bool:
        return passes[r.pass_name or r.skill.rewrite.pass_name].BY_PROGRAMS

    return next(_with_spread(ctx, prop, False, spreads), None) is not None


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
    yield from _structural_proposals(ctx, ignore_conditions)
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
