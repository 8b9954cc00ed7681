"""Reverse each accepted lineage step into a Skill.

A step removed one optimization (parent -> child). Reversed, it adds it: before = the child's
source, after = the parent's. Effects come from the two gate results (child time / parent time
per regime, when a GPU measured them); failures avoided are the gate's rejections of removing
the same optimization elsewhere in the lineage, and the rejections competing at that step.

A forward-only pass has no step to reverse: an accepted forward-only probe (lineage/probe.py,
the pass added to the walk's simplest kernel where the expert has it) is its skill, before = the
simplest kernel, after = the probe's candidate, its effects the probe's.
"""

from __future__ import annotations

import difflib
import hashlib
from pathlib import Path
from typing import Any

from klineage.gate.records import GateJSON, Status, regime_outcomes
from klineage.metrics import PAYS_OFF, Speedup, inverse, speedups
from klineage.rewrite import RewritePass, all_passes
from klineage.skills.conditions import (
    BY_PROGRAMS,
    FEATURES,
    learn_threshold,
    regime_features,
    regime_inputs,
    shapes_of,
    with_programs,
)
from klineage.skills.model import (
    Condition,
    Effect,
    Exemplar,
    FailureAvoided,
    Provenance,
    Rewrite,
    Skill,
)
from klineage.store import Store
from klineage.store.db import AttemptRow, LineageRow, NodeRow, ProbeRow, StoreError

# Hardware a pass's rewrite needs, beyond what its sites show in the code.
HARDWARE_CONDITIONS = {
    "tma_descriptors": "GPU compute capability >= 9.0 (tensor descriptors are a Hopper feature)",
}


def _regime_kernels(gate: GateJSON | None) -> dict[str, set[str]]:
    """The Triton kernels launched per regime, from the correctness stage (empty if unknown)."""
    return {r.regime: set(r.kernels) for r in regime_outcomes(gate)}


def exercised(function: str, regime: str, *gates: GateJSON | None) -> bool | None:
    """Whether a step that changed `function` ran that code on `regime`: known only when
    `function` is a kernel some regime launched (a launcher or an inner helper: None)."""
    per = [_regime_kernels(g) for g in gates]
    launched_anywhere = set().union(*(k for d in per for k in d.values()))
    if not function or function not in launched_anywhere:
        return None
    return any(function in d.get(regime, set()) for d in per)


def _regime_dtypes(gate: GateJSON | None) -> dict[str, str | None]:
    """The dtype of each regime the correctness stage passed."""
    return {r.regime: r.dtype for r in regime_outcomes(gate) if r.status is Status.PASSED}


def _diff(before: str, after: str, name: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(True),
            after.splitlines(True),
            f"{name} (without)",
            f"{name} (with)",
            n=2,
        )
    )


def _failure(a: AttemptRow, why: str) -> FailureAvoided:
    where = f"{a.pass_name} at {a.site.get('function') or '<module>'}:{a.site.get('line')}"
    return FailureAvoided(
        attempt=where, stage=a.failed_stage, message=a.message[:600], violated_assumption=why
    )


def says_needed(a: AttemptRow) -> bool:
    """A rejected removal is evidence that the optimization is needed, unless the gate ran out
    of time: a removal too slow to check in one call's time (rows per program 1 on a CPU
    regime, in the interpreter) says the simpler kernel is slow, not that it is wrong."""
    return a.applied and not a.accepted and not (a.gate or {}).get("timed_out")


def trusted(e: Effect) -> bool:
    """An effect retrieval may predict from: a gain beyond its spread, or no gain to be seen
    (within noise, under PAYS_OFF); never a launch-bound regime, old timing, or code that did
    not run there (pays() says which)."""
    return pays(e) is not None


def pays(e: Effect) -> bool | None:
    """True: a gain of PAYS_OFF or more beyond its spread. False: measured and below PAYS_OFF
    (within noise included: no gain to be seen). None: not evidence either way (launch-bound,
    old timing, unexercised, or a gain the spread cannot tell from none)."""
    if e.speedup is None or e.exercised is False or e.status not in ("measured", "within noise"):
        return None
    if e.speedup >= PAYS_OFF:
        return True if e.status == "measured" else None
    return False


def _pays_predicate(effects: list[Effect], prefix: str) -> str:
    yes = [e.regime for e in effects if pays(e) is True]
    no = [e.regime for e in effects if pays(e) is False]
    rest = [f"{e.regime} ({e.status})" for e in effects if pays(e) is None]
    if not yes and not no:
        return f"{prefix}speed not known: no effect is evidence ({', '.join(rest)})"
    text = f"{prefix}pays off (>= {PAYS_OFF}x) on: {', '.join(yes) or 'none'}; not on: {', '.join(no) or 'none'}"
    return text + (f"; not evidence: {', '.join(rest)}" if rest else "")


def _effect(s: Speedup | None, regime: str, **fields: Any) -> Effect:
    if s is None:
        return Effect(regime=regime, measured=False, status="not measured", **fields)
    return Effect(
        regime=regime,
        base_ms=s.base_ms,
        new_ms=s.new_ms,
        speedup=s.value,
        measured=True,
        status=s.status,
        lo=s.lo,
        hi=s.hi,
        side_by_side=s.side_by_side,
        basis=s.basis,
        **fields,
    )


def _probe_effects(
    probe_gate: dict[str, Any],
    simplest_gate: dict[str, Any] | None,
    function: str,
    env: dict[str, Any],
    lid: str,
    step: int,
    context: str = "simplest",
) -> list[Effect]:
    """Effects of a forward probe: the simplest kernel (base) against it with the step's
    optimization added back (new), per regime both timed (side by side: the probe was gated
    beside the simplest kernel). With no simplest_gate (a forward-only pass added to the
    family's naive kernel, context "naive"), the ratios the probe was timed with, beside it."""
    dtypes = _regime_dtypes(probe_gate)
    return [
        _effect(
            x,
            regime,
            gpu=env.get("gpu_name"),
            arch=env.get("compute_capability"),
            dtype=dtypes.get(regime),
            environment=env or None,
            exercised=exercised(function, regime, simplest_gate, probe_gate),
            lineage_id=lid,
            step=step,
            context=context,
        )
        for regime, x in speedups(simplest_gate, probe_gate).items()
    ]


def skill_id(pass_name: str, lineage_id: str, step: int, *, forward_only: bool = False) -> str:
    # A forward-only skill sits at the simplest kernel's step, beside that step's own skill.
    key = f"{pass_name}/{lineage_id}/{'forward/' if forward_only else ''}{step}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def _speed_conditions(
    effects: list[Effect],
    lin: LineageRow,
    step: int,
    prefix: str,
    evidence: str,
    added_to: tuple[str, RewritePass | None],
) -> list[Condition]:
    """The learned threshold (when one separates the regimes) and the "pays off" predicate of
    measured effects; `prefix` says where they were measured, `evidence` how, `added_to` the
    kernel the optimization was added to and its pass (a BY_PROGRAMS pass is judged first on
    how many programs that kernel launched)."""
    measured = [e for e in effects if e.measured and e.speedup is not None]
    # Thresholds and "pays off" come only from effects that are evidence (klineage/metrics.py):
    # launch-bound regimes and gains within the measured spread never count as paying.
    speeds = {
        e.regime: e.speedup for e in measured if pays(e) is not None and e.speedup is not None
    }
    feats = regime_features(lin.problem_path)
    source, p = added_to
    by_programs = p is not None and p.BY_PROGRAMS
    if by_programs and len(speeds) > 1:
        inputs = regime_inputs(lin.problem_path)
        feats = with_programs(feats, shapes_of(inputs), source)
    learned = (
        learn_threshold(
            speeds,
            feats,
            lin.problem_path,
            f"lineage {lin.id} step {step}",
            BY_PROGRAMS if by_programs else FEATURES,
        )
        if len(speeds) > 1
        else None
    )
    out = [learned] if learned is not None else []
    if measured:
        out.append(
            Condition(
                kind="measured", predicate=_pays_predicate(measured, prefix), evidence=evidence
            )
        )
    return out


def extract_skills(store: Store, lineage_id: str) -> list[Skill]:
    """One Skill per accepted step of a stored lineage, in step order, then one per accepted
    forward-only probe."""
    lin = store.get_lineage(lineage_id)
    if lin is None:
        raise StoreError(f"no lineage {lineage_id!r} in {store.path}")
    passes = all_passes()
    nodes = {n.id: n for n in store.nodes(lin.id)}
    attempts = store.attempts(lin.id)
    env = lin.environment or {}
    versions = {k: str(env[k]) for k in ("torch", "triton", "klineage", "python") if env.get(k)}
    skills: list[Skill] = []
    all_probes = store.probes(lin.id)
    probes = {p.step: p for p in all_probes if not p.forward_only}
    for child in sorted(nodes.values(), key=lambda n: n.step):
        if child.parent_id is None or child.via_attempt is None:
            continue
        parent = nodes[child.parent_id]
        step = next(a for a in attempts if a.id == child.via_attempt)
        p = passes.get(step.pass_name)
        site = step.site
        where = f"{site.get('function') or '<module>'}:{site.get('line')}"
        conditions = [
            Condition(
                kind="static",
                predicate=f"code has: {p.ANCHOR if p else step.pass_name}",
                evidence=f"site {where} in {Path(lin.expert_path).name}: {site.get('description', '')}",
            )
        ]
        if step.pass_name in HARDWARE_CONDITIONS:
            conditions.append(
                Condition(
                    kind="static",
                    predicate=HARDWARE_CONDITIONS[step.pass_name],
                    evidence="what the rewrite emits",
                )
            )
        held = [r for r, _ in _regime_dtypes(child.gate).items()]
        conditions.append(
            Condition(
                kind="measured",
                predicate=f"correct without it on: {', '.join(held) or 'none'}",
                evidence=f"gate ({lin.device}), lineage {lin.id} step {child.step}",
            )
        )
        # The child (without the optimization) was gated beside its parent (with it): the
        # effect is child time / parent time, the inverse of the child's ratio to its base.
        measured_here = speedups(parent.gate, child.gate)
        dtypes = _regime_dtypes(child.gate)
        gpu = env.get("gpu_name")
        arch = env.get("compute_capability")
        effects: list[Effect] = [
            _effect(
                inverse(measured_here[regime]) if regime in measured_here else None,
                regime,
                gpu=gpu,
                arch=arch,
                dtype=dtypes.get(regime),
                environment=env or None,
                exercised=exercised(site.get("function") or "", regime, parent.gate, child.gate),
                lineage_id=lin.id,
                step=child.step,
            )
            for regime in held
        ]
        probe = probes.get(child.step)
        base = nodes.get(probe.base_node) if probe is not None else None
        probed = (
            _probe_effects(
                probe.gate, base.gate, site.get("function") or "", env, lin.id, child.step
            )
            if probe is not None and probe.accepted and probe.gate is not None and base is not None
            else []
        )
        conditions += _speed_conditions(
            effects,
            lin,
            child.step,
            "",
            f"{gpu} ({arch}), child/parent time side by side, lineage {lin.id} step {child.step}",
            (child.source, p),
        )
        if probed:
            conditions.append(
                Condition(
                    kind="measured",
                    predicate=_pays_predicate(probed, "added to the walk's simplest kernel, "),
                    evidence=f"{gpu} ({arch}), forward probe, lineage {lin.id} step {child.step}",
                )
            )
            effects += probed
        if probe is not None and probe.applied and not probe.accepted:
            conditions.append(
                Condition(
                    kind="measured",
                    predicate="needs more of the expert's kernel: added to the walk's simplest kernel, it failed the gate",
                    evidence=f"forward probe ({lin.device}), lineage {lin.id} step {child.step}: {probe.message[:300]}",
                )
            )
        failures = [
            _failure(
                a,
                f"removing {a.pass_name} broke the kernel here: the optimization's form is needed for correctness",
            )
            for a in attempts
            if a.pass_name == step.pass_name and says_needed(a)
        ]
        failures += [
            _failure(a, "a competing simplification at this step that the gate rejected")
            for a in attempts
            if a.parent_id == parent.id and says_needed(a) and a.pass_name != step.pass_name
        ]
        name = Path(lin.expert_path).parent.name + "/" + Path(lin.expert_path).name
        intent = (
            p.DESCRIPTION if p else step.pass_name
        ) + f" (as at {where}: {site.get('description', '')})"
        anchor = p.ANCHOR if p else ""
        if step.pass_name == "llm_simplify":  # what the LLM said it removed is the skill
            from klineage.lineage.llm_pass import removed_name

            intent = (
                step.reason.replace("LLM removed", "Add back", 1)
                + " (an optimization an LLM named and removed; the gate accepted the kernel without it)"
            )
            anchor = f"LLM-named: {removed_name(step.reason)}"
        skills.append(
            Skill(
                id=skill_id(step.pass_name, lin.id, child.step),
                name=step.pass_name,
                intent=intent,
                category=p.CATEGORY
                if p
                else ("llm" if step.pass_name == "llm_simplify" else "unknown"),
                anchor=anchor,
                rewrite=Rewrite(pass_name=step.pass_name, params=site.get("params") or {}),
                exemplar=Exemplar(
                    before=child.source,
                    after=parent.source,
                    diff=_diff(child.source, parent.source, name),
                ),
                conditions=conditions,
                effects=effects,
                failures_avoided=failures,
                provenance=[
                    Provenance(
                        source_kernel=lin.expert_path,
                        problem=lin.problem_path,
                        lineage_id=lin.id,
                        step=child.step,
                        device=lin.device,
                        tool_versions=versions,
                        date=lin.updated,
                    )
                ],
            )
        )
    for probe in all_probes:
        simplest = nodes.get(probe.base_node)
        if probe.forward_only and probe.accepted and probe.candidate and simplest is not None:
            # The accepted probe whose kernel this one was added to, if any (lineage/probe.py).
            made = {q.candidate: q.pass_name for q in all_probes if q.forward_only and q.accepted}
            after = made.get(probe.base_source) if probe.base_source else None
            p = passes.get(probe.pass_name)
            skills.append(_forward_only_skill(lin, probe, simplest, p, after))
    return skills


def _forward_only_skill(
    lin: LineageRow,
    probe: ProbeRow,
    simplest: NodeRow,
    p: RewritePass | None,
    after: str | None = None,
) -> Skill:
    """The skill of an accepted forward-only probe: the pass added to the walk's simplest
    kernel (its site there, with that site's params), where the expert already has it; or to
    the family's naive kernel, or (`after`, a pass's name) to the kernel that pass's accepted
    probe made of it."""
    env = lin.environment or {}
    gpu, arch = env.get("gpu_name"), env.get("compute_capability")
    versions = {k: str(env[k]) for k in ("torch", "triton", "klineage", "python") if env.get(k)}
    # Added to the family's naive kernel where the simplest kernel had no place for it.
    before = probe.base_source or simplest.source
    onto = "the family's naive kernel" + (f" after {after}" if after else "")
    context, onto = (
        ("naive", onto) if probe.base_source else ("simplest", "the walk's simplest kernel")
    )
    sites = p.forward_sites(before) if p else []
    site = sites[0] if sites else None
    where = f"{site.function or '<module>'}:{site.line}" if site else "?"
    described = site.description if site else ""
    expert = Path(lin.expert_path).parent.name + "/" + Path(lin.expert_path).name
    at = f"lineage {lin.id} step {probe.step}"
    dtypes = _regime_dtypes(probe.gate)
    held = list(dtypes)
    conditions = [
        Condition(
            kind="static",
            predicate=f"code has: {p.ANCHOR if p else probe.pass_name}",
            evidence=f"site {where} in {onto} of {expert}: {described}; "
            "none in the expert, which has the optimization",
        ),
        Condition(
            kind="measured",
            predicate=f"correct with it on: {', '.join(held) or 'none'}",
            evidence=f"forward probe ({lin.device}), {at}",
        ),
    ]
    # Launch sites name the kernel they rewrite; the site's function is its launcher.
    function = str(site.params.get("kernel") or site.function) if site else ""
    probed = _probe_effects(
        probe.gate or {},
        None if probe.base_source else simplest.gate,
        function,
        env,
        lin.id,
        probe.step,
        context,
    )
    timed = {e.regime for e in probed}
    # Regimes it was correct on but not timed (every regime on a CPU), as a step's are.
    probed += [
        _effect(
            None,
            r,
            gpu=gpu,
            arch=arch,
            dtype=dtypes.get(r),
            environment=env or None,
            lineage_id=lin.id,
            step=probe.step,
            context=context,
        )
        for r in held
        if r not in timed
    ]
    conditions += _speed_conditions(
        probed,
        lin,
        probe.step,
        f"added to {onto}, ",
        f"{gpu} ({arch}), forward probe, {at}",
        (before, p),
    )
    candidate = probe.candidate or ""
    return Skill(
        id=skill_id(probe.pass_name, lin.id, probe.step, forward_only=True),
        name=probe.pass_name,
        intent=(p.DESCRIPTION if p else probe.pass_name)
        + f" (as at {where}: {described}; learned by adding it to {onto},"
        f" since {probe.pass_name} has no backward form and no step of the walk removes it;"
        f" the expert {expert} has it)",
        category=p.CATEGORY if p else "unknown",
        anchor=p.ANCHOR if p else "",
        rewrite=Rewrite(pass_name=probe.pass_name, params=dict(site.params) if site else {}),
        exemplar=Exemplar(before=before, after=candidate, diff=_diff(before, candidate, expert)),
        conditions=conditions,
        effects=probed,
        provenance=[
            Provenance(
                source_kernel=lin.expert_path,
                problem=lin.problem_path,
                lineage_id=lin.id,
                step=probe.step,
                device=lin.device,
                tool_versions=versions,
                date=lin.updated,
            )
        ],
    )
