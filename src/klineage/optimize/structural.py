"""The klineage policy's structural phase (optimize/policies.py): the structural skills
retrieved again on the best kernel each time one is kept, a reshaping rewrite with the split its
kernel needs, a kept rewrite's structural value measured at its neighbours, the alternatives a
kept rewrite passed over, and the regime dispatch that follows a trial faster on some regimes
only. docs/OPTIMIZE.md says why each is there."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from klineage.optimize.policies import Context, Proposal, retrieved, skill_proposal
from klineage.rewrite import all_passes


def _writer(r: Any, passes: dict[str, Any]) -> Any:
    """The pass that writes a retrieved skill: its own, or another form's (retrieve.OTHER_FORMS)."""
    return passes[r.pass_name or r.skill.rewrite.pass_name]


def structural_proposals(ctx: Context, ignore_conditions: bool) -> Iterator[Proposal]:
    """The selected structural skills, retrieved again on the best kernel each time one is
    kept: a structural rewrite changes what the others find and what their conditions read
    (column tiling turns 384 column programs into 3, where a split over rows is then what the
    GPU needs; split first, the tiling finds no place). Within one retrieval, the skills judged
    on the program count (RewritePass.BY_PROGRAMS) come after those that reshape the grid, and
    those that change only how one program walks its tile (RewritePass.IN_PROGRAM) last.

    A reshaping rewrite that was correct but not faster is followed by itself and, in the same
    candidate, the program-count skills its kernel now meets: on the H200 (2026-12-03) the
    tiled column max was 0.89x of the naive kernel alone (3 programs where there were 384),
    and the split over rows its few programs call for is what pays."""
    from klineage.rewrite import all_passes
    from klineage.skills.retrieve import structural as is_structural

    tag = "what-only" if ignore_conditions else "skill"
    passes = all_passes()

    def spreads(r: Any) -> bool:
        return _writer(r, passes).BY_PROGRAMS

    tried: set[str] = set()
    # Selected on a kernel a later structural rewrite replaced: (that kernel, the proposal).
    passed_over: list[tuple[str, Proposal]] = []
    while True:
        source = ctx.best_source
        ranked = [r for r in retrieved(ctx, ignore_conditions) if r.selected and is_structural(r)]
        ranked.sort(key=lambda r: (_writer(r, passes).IN_PROGRAM, spreads(r)))
        fresh = [(r, skill_proposal(r, tag)) for r in ranked]
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
    if ctx.device != "cuda":
        return  # a neighbour is a measurement: on the CPU it would be kept on the prediction
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


UNKNOWN_ALTERNATIVE_BEHIND = 8.0
"""An alternative whose gain is unknown is tried only on a kernel at most this many times slower
than the best: one rewrite would have to make up the whole gap. On the H200 (2026-12-02) the
tiled transpose was tried 3.76x behind and won (14.3x); on an H100 (2026-12-05, 2026-12-06)
tile_accumulator on the naive column softmax, 26.8x behind, ran at 0.149x and 0.041x of the
best, a gate call of the budget each time."""


def _alternatives(
    ctx: Context, passed_over: list[tuple[str, Proposal]], tried: set[str]
) -> Iterator[tuple[str, Proposal]]:
    """The passed-over proposals not tried since, as proposals on the kernel each was selected
    on; mechanical ones only, and only where its prediction there is more than the best kernel
    has gained over that kernel since (a known smaller gain cannot win), or unknown and the gap
    at most UNKNOWN_ALTERNATIVE_BEHIND. Yields
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
        if prop.predicted is None and since > UNKNOWN_ALTERNATIVE_BEHIND:
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
    for r in retrieved(replace(ctx, best_source=made), ignore_conditions):
        if not (r.selected and spreads(r) and r.materializer == "mechanical"):
            continue
        if not (r.predicted and r.score >= PAYS_OFF):
            continue  # only where its condition says the new grid needs it
        second = skill_proposal(r, tag)
        yield replace(
            prop,
            key=f"{prop.key}+{second.key}",
            label=f"{prop.what or prop.label} + {second.what}: together, since its kernel meets "
            f"{r.skill.name}'s condition (predicted {r.score:.2f}x)",
            what=f"{prop.what or prop.label} + {second.what}",
            then=[*prop.then, (second.pass_name or "", second.params)],
            predicted=r.score,
        )


def dispatching(ctx: Context, proposals: Iterator[Proposal]) -> Iterator[Proposal]:
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
    """Whether `structural_proposals` follows prop's trial (accepted, not kept) by prop
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
        return _writer(r, passes).BY_PROGRAMS

    return next(_with_spread(ctx, prop, False, spreads), None) is not None
