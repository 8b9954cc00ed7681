"""Retrieve the skills that apply to a target kernel, with why each was selected or excluded.

A skill is selected when its static conditions hold (its pass finds a forward site in the
target's code; its hardware needs are met) and its measured conditions match at least one of
the target's regimes: a learned threshold holds there, or, with no threshold, the nearest
measured regime (by log shape features) paid off. Selected skills are ranked by the best
predicted speedup. Predictions are labelled as such; only the gate measures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from klineage.metrics import geomean
from klineage.problem.shapes import features
from klineage.rewrite import all_passes
from klineage.skills.conditions import (
    EXTRAPOLATES,
    PAYS_OFF,
    problem_shapes,
    regime_features,
    shapes_of,
    with_programs,
)
from klineage.skills.extract import HARDWARE_CONDITIONS, trusted
from klineage.skills.model import Condition, Skill

# A skill learned in an expert's code shape, and a pass that writes the same optimization into
# the shape naive kernels have: rows_per_program's pass needs the expert's rows-per-program
# constexpr, multi_row turns a one-row-per-program kernel into ROWS rows per program.
# split_k's skill (a long serial walk split over more programs, partials combined; its
# condition on the program count) is written by split_online where the walk is an online
# softmax walk followed by a write walk, which split_k's single-accumulator shape does not fit.
# tile_accumulator's (a loop's per-step reduction kept per element of the tile, learned from the
# colsum expert) is written by tile_online on an online softmax walk, whose running maximum and
# rescaled sum are a pair no single accumulator update matches.
OTHER_FORMS = {
    "rows_per_program": "multi_row",
    "split_k": "split_online",
    "tile_accumulator": "tile_online",
}
# A form that writes a skill ahead of its own pass wherever it finds a site: the code's shape
# defeats the skill's own rewrite there. multiple_of_hints states offsets' contiguity so loads
# vectorize; a chunk loaded back to front (a suffix scan's `A - tl.arange(0, C)`) has none to
# state, and ascending_scan loads it in ascending addresses with its scans reversed (1.07-1.19x
# on the reverse cumsum's kernels side by side on an H100, docs/benchmarks.md).
FIRST_FORMS = {"multiple_of_hints": "ascending_scan"}


@dataclass
class Retrieved:
    skill: Skill
    selected: bool
    reasons: list[str] = field(default_factory=list)
    sites: int = 0
    predicted: dict[str, float] = field(default_factory=dict)  # target regime -> predicted speedup
    # How it would be materialized: "mechanical" (its pass finds a forward site), "llm" (no
    # site, but an LLM may write it), or "" when excluded statically.
    materializer: str = ""
    # Why it was excluded, as data: "measured" (its conditions predict no gain here), "static"
    # (no place for it, or hardware it needs), "unregistered" (its pass is not installed); None
    # when selected. Policies read this, never the reasons' wording.
    excluded: str | None = None
    # The pass that writes it mechanically: the skill's own, or another form of the same
    # optimization for code shaped otherwise (OTHER_FORMS); "" when none applies.
    pass_name: str = ""

    @property
    def score(self) -> float:
        return max(self.predicted.values(), default=1.0)


def _distance(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    keys = [k for k in a if k in b and a[k] > 0 and b[k] > 0]
    return math.sqrt(sum(math.log(a[k] / b[k]) ** 2 for k in keys)) if keys else math.inf


# A threshold is used within this factor of the feature values it was learned on, not beyond:
# "row_length >= 90510" learned on vocabularies says nothing about a head dimension of 64.
EXTRAPOLATION = 2.0
# The nearest measured regime predicts only when it is near: within about NEAR_FACTOR on each
# shape feature compared (log distance ln(NEAR_FACTOR) * sqrt(features)). Farther, the skill's
# effect there is unknown (the gate decides), not the effect measured on another kind of shape:
# split_k learned on column sums (rows of a few columns) says nothing about a long-K matmul's
# 16 rows of a million.
NEAR_FACTOR = 4.0


def _values(c: Condition) -> list[float]:
    feats = regime_features(c.source_problem) if c.source_problem else {}
    return [f[c.feature] for f in feats.values() if c.feature and c.feature in f]


def _span(c: Condition) -> str:
    v = _values(c)
    return (
        f"{min(v):.4g}..{max(v):.4g} in {Path(c.source_problem or '').parent.name}"
        if v
        else "unknown"
    )


def _within(c: Condition, feats: dict[str, float]) -> bool:
    """Whether a target's feature lies where the threshold's source regimes were (their
    problem's regimes, within EXTRAPOLATION); a threshold without a known source is used, and
    so is one on a feature that extrapolates (conditions.py EXTRAPOLATES), at any value."""
    if c.feature in EXTRAPOLATES:
        return True
    v = _values(c)
    x = feats.get(c.feature or "")
    if not v or x is None:
        return True
    return min(v) / EXTRAPOLATION <= x <= max(v) * EXTRAPOLATION


def _predict(
    skill: Skill, target: dict[str, dict[str, float]]
) -> tuple[dict[str, float], list[str]]:
    thresholds = [c for c in skill.conditions if c.feature is not None]
    measured = [e for e in skill.effects if e.measured and e.speedup is not None and trusted(e)]
    if not measured:
        return {}, ["no trusted measured effect: the gain on this target is unknown"]
    # A forward probe measured the step where optimize starts from (the walk's simplest
    # kernel); the walk measured it with the rest of the expert around. For the same lineage
    # and regime, the probe's effect replaces the walk's; other lineages keep theirs.
    forward = ("simplest", "naive")  # a probe: added to a walk's simplest or the naive kernel
    probed = {(e.lineage_id, e.regime) for e in measured if e.context in forward}
    measured = [
        e for e in measured if e.context in forward or (e.lineage_id, e.regime) not in probed
    ]
    paying = [e.speedup for e in measured if e.speedup is not None and e.speedup >= PAYS_OFF]
    gain = geomean(paying) or 1.0
    predicted: dict[str, float] = {}
    why: list[str] = []
    for regime, feats in target.items():
        usable = [c for c in thresholds if _within(c, feats)]
        for c in thresholds:
            if c not in usable and c.feature in feats:
                why.append(
                    f"{regime}: '{c.predicate}' not used: {c.feature} {feats[c.feature]:.4g} is outside the values it was learned on ({_span(c)})"
                )
        verdicts = [c.holds(feats) for c in usable]
        if any(v is not None for v in verdicts):
            ok = any(v for v in verdicts)
            predicted[regime] = gain if ok else 1.0
            c = usable[0]
            why.append(
                f"{regime}: {c.feature} {feats.get(c.feature or '', float('nan')):.4g} {'meets' if ok else 'fails'} '{c.predicate}' -> predicted {predicted[regime]:.2f}x"
            )
            continue
        # No threshold: the nearest measured regime of any source problem decides, by shape.
        feats = {k: v for k, v in feats.items() if k != "programs"}
        best, best_d = None, math.inf
        for e in measured:
            src = next((p.problem for p in skill.provenance if p.lineage_id == e.lineage_id), None)
            f = regime_features(src).get(e.regime, {}) if src else {}
            d = _distance(feats, f)
            if d < best_d:
                best, best_d = e, d
        near = math.log(NEAR_FACTOR) * math.sqrt(max(1, len(feats)))
        if best is not None and best.speedup is not None and best_d > near:
            why.append(
                f"{regime}: no measured regime near it (the nearest, {best.regime}, is {best_d:.1f} apart in log shape features; near is {near:.1f}): gain unknown"
            )
        elif best is not None and best.speedup is not None:
            predicted[regime] = best.speedup
            where = {
                "simplest": " (added to the walk's simplest kernel)",
                "naive": " (added to the family's naive kernel)",
            }.get(best.context, "")
            why.append(
                f"{regime}: nearest measured regime {best.regime}{where} gave {best.speedup:.2f}x -> predicted {best.speedup:.2f}x"
            )
    return predicted, why


def _predict_unconditioned(
    skill: Skill, target: dict[str, dict[str, float]]
) -> tuple[dict[str, float], list[str]]:
    """What an agent that knows what the skill did, but not when, expects: its typical gain
    where it paid off, on every target regime."""
    measured = [
        e.speedup for e in skill.effects if e.measured and e.speedup is not None and trusted(e)
    ]
    paying = [x for x in measured if x >= PAYS_OFF]
    if not paying:
        return {}, ["no trusted paying effect recorded (conditions ignored)"]
    gain = geomean(paying) or 1.0
    return {r: gain for r in target}, [
        f"conditions ignored: its typical gain {gain:.2f}x expected everywhere"
    ]


def structural(r: Retrieved) -> bool:
    """Whether the pass that would write it changes the work's structure (RewritePass.STRUCTURAL)."""
    p = all_passes().get(r.pass_name or r.skill.rewrite.pass_name)
    return bool(p is not None and p.STRUCTURAL)


def retrieve(
    skills: list[Skill],
    problem: Path,
    kernel: Path,
    device: str = "cuda",
    capability: str | None = None,
    *,
    llm: bool = False,
    source: str | None = None,
    target: dict[str, dict[str, float]] | None = None,
    ignore_conditions: bool = False,
    shapes: dict[str, list[list[int]]] | None = None,
) -> list[Retrieved]:
    """Every skill, selected or excluded with reasons; selected first, best predicted first.

    With `llm`, a skill whose pass finds no site in the kernel is not excluded: an LLM may
    write it (its materializer is "llm"). With `ignore_conditions` (the what-only baseline),
    measured conditions are not consulted: the prediction is the skill's typical paying effect
    wherever it was measured. `source` and `target` (regime features) skip re-reading them;
    `shapes` (each regime's input shapes) gives each regime the number of programs the kernel
    launches there, for the skills whose condition is on it."""
    source = source if source is not None else kernel.read_text(encoding="utf-8")
    if target is None:
        inputs = problem_shapes(problem)
        target = {r: features(e) for r, e in inputs.items()}
        shapes = shapes_of(inputs)
    if shapes and any(c.feature == "programs" for s in skills for c in s.conditions):
        target = with_programs(target, shapes, source)
    passes = all_passes()
    out: list[Retrieved] = []
    for s in skills:
        r = Retrieved(s, selected=False)
        p = passes.get(s.rewrite.pass_name)
        if p is None and s.rewrite.pass_name == "llm_simplify" and llm:
            # Named and removed by an LLM in a lineage: only an LLM can write it back.
            r.materializer = "llm"
            r.reasons.append("static: an LLM-named optimization; an LLM would have to write it")
            r.predicted, why = (
                _predict_unconditioned(s, target) if ignore_conditions else _predict(s, target)
            )
            r.reasons += why
            r.selected = not r.predicted or r.score >= PAYS_OFF
            r.excluded = None if r.selected else "measured"
            r.reasons.append(
                "selected: the LLM writes it; the gate will decide"
                if r.selected
                else "excluded (measured): predicted no gain on any target regime"
            )
            out.append(r)
            continue
        if p is None:
            r.excluded = "unregistered"
            r.reasons.append(
                f"excluded: rewrite pass {s.rewrite.pass_name!r} is not registered here"
            )
            out.append(r)
            continue
        sites = p.forward_sites(source)
        r.pass_name = s.rewrite.pass_name
        other = passes.get(OTHER_FORMS.get(s.rewrite.pass_name, ""))
        first = passes.get(FIRST_FORMS.get(s.rewrite.pass_name, ""))
        ahead = first.forward_sites(source) if first is not None else []
        if first is not None and ahead:
            sites, r.pass_name = ahead, first.NAME
            r.reasons.append(
                f"static: written by {first.NAME} (the form of it this code's shape needs first)"
            )
        elif not sites and other is not None:
            sites = other.forward_sites(source)
            if sites:
                r.pass_name = other.NAME
                r.reasons.append(
                    f"static: written by {other.NAME} (the same optimization for this code's shape)"
                )
        r.sites = len(sites)
        if not sites and not llm:
            r.excluded = "static"
            r.reasons.append(
                f"excluded (static): no place in {kernel.name} where it could be added ({p.ANCHOR})"
            )
            out.append(r)
            continue
        r.materializer = "mechanical" if sites else "llm"
        need = HARDWARE_CONDITIONS.get(s.rewrite.pass_name)
        if need and (device != "cuda" or capability is None or float(capability) < 9.0):
            r.excluded = "static"
            r.reasons.append(
                f"excluded (static): needs {need}; target device {device}, capability {capability or 'unknown'}"
            )
            out.append(r)
            continue
        if sites:
            r.reasons.append(
                f"static: {len(sites)} site(s) where it could be added ({sites[0].function or '<module>'}:{sites[0].line} ...)"
            )
        else:
            r.reasons.append(
                f"static: no site for its rewrite ({p.ANCHOR}); an LLM would have to write it"
            )
        r.predicted, why = (
            _predict_unconditioned(s, target) if ignore_conditions else _predict(s, target)
        )
        r.reasons += why
        if not r.predicted:
            r.selected = True
            r.reasons.append(
                "selected: applicable, gain unknown (no trusted measurement); the gate will decide"
            )
        elif r.score >= PAYS_OFF:
            r.selected = True
            best = max(r.predicted, key=lambda k: r.predicted[k])
            r.reasons.append(f"selected: predicted {r.score:.2f}x on {best}")
        elif unknown := [t for t in target if t not in r.predicted]:
            # No gain predicted where something is known, but nothing known on these: an
            # unknown is not a "no" (the skill is tried after those predicted to pay).
            r.selected = True
            r.reasons.append(
                f"selected: gain unknown on {', '.join(unknown)} (no gain predicted elsewhere); the gate will decide"
            )
        else:
            r.excluded = "measured"
            r.reasons.append("excluded (measured): predicted no gain on any target regime")
        out.append(r)

    # Equal predictions (often: gain unknown) are tried structural first, where naive kernels
    # lose the most (docs/SKILLS.md, "Retrieval").
    return sorted(out, key=lambda x: (not x.selected, -x.score, not structural(x), x.skill.name))
