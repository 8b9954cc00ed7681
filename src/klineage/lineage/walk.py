"""Walk an expert backward: enumerate (pass, site) simplifications, gate them, keep one, repeat.

Every attempt (applied or not, accepted or rejected) is committed to the store as soon as it is
known, so an interrupted walk resumes where it stopped: the same command finds the running
lineage, its last node, and the attempts already gated there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from klineage.config import GateConfig, default_cache_dir
from klineage.errors import LoadError, UsageError
from klineage.gate import GateResult, run_gate
from klineage.gate.records import GateJSON, Overrides, profile_rows
from klineage.gate.request import Event
from klineage.llm.base import LLMBackend
from klineage.metrics import speedups, timed_geomean
from klineage.problem.loader import check_overrides, read_source
from klineage.rewrite import RewritePass, Site, all_passes
from klineage.store import Store

# The walk's progress, by kind ("step", "attempt", "result", "accepted", "resume"), for a caller
# to show (gate/request.py: Event).
EventCallback = Callable[[str, Event], None]

# Policies choose which accepted simplification becomes the next step.
#   least_cost: remove first the optimization whose removal costs least (smallest measured
#       slowdown on a GPU), so the reversed lineage applies the biggest wins first. Without a GPU
#       there is no cost: candidates are taken in CATEGORY_ORDER (hints before structure).
#   most_cost: the opposite.
#   first: the first accepted candidate in registry order; gates the fewest candidates.
#   exhaustive: gate every candidate at every node (records every rejection), then as first.
POLICIES = ("least_cost", "most_cost", "first", "exhaustive")
CATEGORY_ORDER = (
    "hint",
    "tuning",
    "arithmetic",
    "memory",
    "parallelism",
    "control-flow",
    "hardware",
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def lineage_id(
    problem_src: str,
    expert_src: str,
    device: str,
    policy: str,
    regimes: list[str],
    passes: list[str],
    overrides: Overrides | None = None,
) -> str:
    key: list[Any] = [
        sha(problem_src),
        sha(expert_src),
        device,
        policy,
        sorted(regimes),
        sorted(passes),
    ]
    if overrides:  # a walk at other --set sizes is another lineage; none keeps older ids
        key.append(sorted((k, repr(v)) for k, v in overrides.items()))
    return sha(json.dumps(key))[:16]


def candidate_file(source: str) -> Path:
    """Content-addressed file for a candidate source (the gate takes files)."""
    d = default_cache_dir() / "candidates"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{sha(source)[:24]}.py"
    if not p.exists():
        tmp = p.with_suffix(".tmp")
        tmp.write_text(source, encoding="utf-8")
        tmp.replace(p)
    return p


def kernel_ms(gate: GateResult | GateJSON) -> dict[str, float]:
    """Per-regime decision time of a GateResult, or one stored as JSON (empty when not
    measured)."""
    return {r: row.kernel_ms for r, row in profile_rows(gate).items()}


def slowdown(parent_gate: dict[str, Any], child_gate: dict[str, Any]) -> float | None:
    """Geometric mean of child/parent time over the regimes that are not launch-bound (side
    by side where the child was gated beside its parent); None when none was measured."""
    g = timed_geomean(speedups(parent_gate, child_gate))
    return 1.0 / g if g else None


def _order(
    candidates: list[tuple[RewritePass, Site]], rejected_before: set[tuple[str, str, str]]
) -> list[tuple[RewritePass, Site]]:
    def rank(item: tuple[RewritePass, Site]) -> tuple[int, int, str, int]:
        p, s = item
        cat = (
            CATEGORY_ORDER.index(p.CATEGORY)
            if p.CATEGORY in CATEGORY_ORDER
            else len(CATEGORY_ORDER)
        )
        seen = int((p.NAME, s.function, s.description) in rejected_before)
        return (seen, cat, p.NAME, s.index)

    return sorted(candidates, key=rank)


class Walk:
    def __init__(
        self,
        store: Store,
        problem: Path,
        expert: Path,
        *,
        device: str,
        policy: str,
        max_steps: int,
        regimes: list[str],
        config: GateConfig,
        passes: dict[str, RewritePass],
        on_event: EventCallback | None,
        overrides: Overrides | None = None,
    ) -> None:
        self.store, self.problem, self.expert = store, problem, expert
        self.overrides = dict(overrides or {})
        self.device, self.policy, self.max_steps, self.regimes = device, policy, max_steps, regimes
        self.config, self.passes = config, passes
        self.emit = on_event or (lambda kind, data: None)

    def gate(self, source: str, base: str | None = None) -> GateResult:
        """Gate `source`; on a GPU, timed beside `base` (its parent) for side-by-side ratios."""
        return run_gate(
            self.problem,
            candidate_file(source),
            device=self.device,
            regimes=self.regimes or None,
            overrides=self.overrides,
            config=self.config,
            base=candidate_file(base) if base is not None and self.device == "cuda" else None,
        )

    def run(self) -> str:
        problem_src, expert_src = read_source(self.problem), read_source(self.expert)
        lid = lineage_id(
            problem_src,
            expert_src,
            self.device,
            self.policy,
            self.regimes,
            list(self.passes),
            self.overrides,
        )
        existing = self.store.get_lineage(lid)
        if existing is not None and existing.status != "running":
            self.emit("done", {"id": lid, "reason": existing.stop_reason, "resumed": False})
            return lid
        if existing is None:
            self.store.create_lineage(
                lid,
                str(self.problem),
                str(self.expert),
                sha(problem_src),
                sha(expert_src),
                self.device,
                self.policy,
                self.regimes,
            )
        nodes = self.store.nodes(lid)
        if not nodes:
            self.emit("expert", {"id": lid})
            result = self.gate(expert_src)
            if not result.accepted:
                self.store.set_lineage_status(
                    lid, "refused", f"the expert itself fails the gate: {result.message}"
                )
                self.emit("done", {"id": lid, "reason": "refused"})
                return lid
            env = result.environment.model_dump(mode="json") if result.environment else None
            self.store.add_node(
                lid, 0, None, None, expert_src, sha(expert_src), result.model_dump(mode="json")
            )
            self.store.set_lineage_status(lid, "running", "", env)
            nodes = self.store.nodes(lid)
        else:
            self.emit("resume", {"id": lid, "step": nodes[-1].step})
        node = nodes[-1]
        while True:
            if node.step >= self.max_steps:
                return self._finish(lid, f"step limit ({self.max_steps}) reached")
            chosen = self._step(lid, node)
            if chosen is None:
                return lid
            node = self.store.nodes(lid)[-1]

    def _finish(self, lid: str, reason: str) -> str:
        self.store.set_lineage_status(lid, "done", reason)
        self.emit("done", {"id": lid, "reason": reason})
        return lid

    def _rejected_before(self, lid: str) -> set[tuple[str, str, str]]:
        return {
            (a.pass_name, a.site.get("function", ""), a.site.get("description", ""))
            for a in self.store.attempts(lid)
            if a.applied and not a.accepted
        }

    def _settled(self, lid: str) -> tuple[set[tuple[str, str, str]], set[tuple[str, str]]]:
        """What earlier nodes settled: named sites already simplified once (a block size is
        shrunk once, not halved down to the minimum step by step), and candidates that did not
        apply (a computed block size stays computed), which are not retried."""
        done, inapplicable = set(), set()
        for a in self.store.attempts(lid):
            name = (a.site.get("params") or {}).get("name")
            if a.accepted and name:
                done.add((a.pass_name, a.site.get("function", ""), str(name)))
            if not a.applied:
                inapplicable.add((a.pass_name, a.site.get("description", "")))
        return done, inapplicable

    def _step(self, lid: str, node: Any) -> int | None:
        done_names, inapplicable = self._settled(lid)
        candidates = [
            (p, s)
            for p in self.passes.values()
            for s in p.backward_sites(node.source)
            if (p.NAME, s.function, str(s.params.get("name"))) not in done_names
            and (p.NAME, s.description) not in inapplicable
        ]
        if not candidates:
            self._finish(lid, "no registered optimization remains")
            return None
        done = {a.site_key: a for a in self.store.attempts(lid, node.id)}
        ordered = _order(candidates, self._rejected_before(lid))
        if self.policy == "most_cost":
            ordered = ordered[::-1] if self.device == "cpu" else ordered
        lazy = self.policy == "first" or (
            self.device == "cpu" and self.policy in ("least_cost", "most_cost")
        )
        accepted: list[tuple[int, dict[str, Any], str]] = []  # (attempt id, gate, source)
        self.emit("step", {"step": node.step + 1, "candidates": len(ordered)})
        for p, s in ordered:
            prior = done.get(s.key)
            if prior is not None:
                if prior.accepted and prior.candidate is not None and prior.gate is not None:
                    accepted.append((prior.id, prior.gate, prior.candidate))
            else:
                aid, gate, source = self._attempt(lid, node, p, s)
                if gate is not None and source is not None:
                    accepted.append((aid, gate, source))
            if accepted and lazy:
                break
        if not accepted:
            tried = self.store.attempts(lid, node.id)
            if tried and not any(a.applied for a in tried):
                self._finish(
                    lid,
                    "no registered optimization remains (the sites left are ones no pass can simplify)",
                )
            else:
                self._finish(lid, "no simplification passes the gate")
            return None
        aid, gate, source = self._choose(node.gate, accepted)
        nid = self.store.add_node(lid, node.step + 1, node.id, aid, source, sha(source), gate)
        self.emit("accepted", {"step": node.step + 1, "attempt": aid})
        return nid

    def _attempt(
        self, lid: str, node: Any, p: RewritePass, s: Site
    ) -> tuple[int, dict[str, Any] | None, str | None]:
        site = asdict(s)
        self.emit("attempt", {"pass": p.NAME, "site": s.key, "description": s.description})
        r = p.simplify(node.source, s)
        if not r.applied or r.source is None:
            aid = self.store.add_attempt(
                lid,
                node.id,
                node.step + 1,
                p.NAME,
                s.key,
                site,
                applied=False,
                accepted=False,
                reason=r.reason,
            )
            self.emit(
                "result",
                {
                    "pass": p.NAME,
                    "site": s.key,
                    "applied": False,
                    "accepted": False,
                    "message": r.reason,
                },
            )
            return aid, None, None
        if r.source == node.source:
            aid = self.store.add_attempt(
                lid,
                node.id,
                node.step + 1,
                p.NAME,
                s.key,
                site,
                applied=False,
                accepted=False,
                reason="the rewrite changed nothing",
            )
            return aid, None, None
        g = self.gate(r.source, node.source)
        gate = g.model_dump(mode="json")
        failed = g.failed_stage.value if g.failed_stage else None
        aid = self.store.add_attempt(
            lid,
            node.id,
            node.step + 1,
            p.NAME,
            s.key,
            site,
            applied=True,
            accepted=g.accepted,
            reason=r.reason,
            failed_stage=failed,
            message=g.message,
            candidate=r.source,
            candidate_sha=sha(r.source),
            gate=gate,
            seconds=g.seconds,
        )
        self.emit(
            "result",
            {
                "pass": p.NAME,
                "site": s.key,
                "applied": True,
                "accepted": g.accepted,
                "message": g.message,
            },
        )
        return aid, (gate if g.accepted else None), (r.source if g.accepted else None)

    def _choose(
        self, parent_gate: dict[str, Any], accepted: list[tuple[int, dict[str, Any], str]]
    ) -> tuple[int, dict[str, Any], str]:
        if self.policy not in ("least_cost", "most_cost") or len(accepted) == 1:
            return accepted[0]
        costs = [(slowdown(parent_gate, g), i) for i, (_, g, _) in enumerate(accepted)]
        measured = [(c, i) for c, i in costs if c is not None]
        if not measured:
            return accepted[0]
        pick = min(measured) if self.policy == "least_cost" else max(measured)
        return accepted[pick[1]]


def distill(
    problem: str | Path,
    expert: str | Path,
    *,
    store: Store,
    device: str = "cpu",
    policy: str = "least_cost",
    max_steps: int = 50,
    regimes: list[str] | None = None,
    config: GateConfig | None = None,
    pass_names: list[str] | None = None,
    on_event: EventCallback | None = None,
    llm: LLMBackend | None = None,
    overrides: Overrides | None = None,
) -> str:
    """Walk `expert` backward under the gate; returns the lineage id (stored in `store`).

    overrides: --set NAME=VALUE, the problem's globals rebound for every gate call (recorded in
    each node's gate result, where forward probes read them back).

    With `llm` (an LLMBackend), the LLM-proposed simplification (lineage/llm_pass.py) joins the
    registered passes, tried after them at each node."""
    if policy not in POLICIES:
        raise UsageError(f"--policy {policy}: expected one of {', '.join(POLICIES)}")
    if max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    passes = all_passes()
    if pass_names:
        unknown = [n for n in pass_names if n not in passes]
        if unknown:
            raise UsageError(
                f"unknown rewrite pass {', '.join(unknown)}; known: {', '.join(passes)}"
            )
        passes = {n: passes[n] for n in pass_names}
    if llm is not None:
        from klineage.lineage.llm_pass import NAME, LLMSimplifyPass

        passes = {**passes, NAME: LLMSimplifyPass(llm)}
    problem_path, expert_path = Path(problem).resolve(), Path(expert).resolve()
    for p in (problem_path, expert_path):
        if not p.exists():
            raise LoadError(str(p), "file not found", expected="a Python file")
    check_overrides(problem_path, overrides or {})
    # Timing is what ranks steps on a GPU; torch.compile is not needed for that, and rewrites of
    # a trusted expert are not cheats, so suspicion is recorded but does not reject.
    config = config or GateConfig(profile_compile=False, allow_suspicious=True)
    walk = Walk(
        store,
        problem_path,
        expert_path,
        device=device,
        policy=policy,
        max_steps=max_steps,
        regimes=list(regimes or []),
        config=config,
        passes=passes,
        on_event=on_event,
        overrides=overrides,
    )
    return walk.run()
