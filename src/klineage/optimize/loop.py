"""The optimize loop: from a correct kernel, try what a policy proposes, one at a time, under the
gate and a budget; keep a candidate only if it is correct on every regime and faster.

Faster means, on a GPU, a geometric-mean speedup over the timed regimes of at least 1 + margin
against the best kernel so far, both measured by the gate. On the CPU nothing is timed: a
correct candidate is kept when its skill predicts a gain (>= 1.05x) on the target's regimes,
and the result is labelled "predicted, not measured".

Budget: gate calls spent on candidates (the starting kernel's gate call is the baseline and is
not charged; an identical candidate is not gated twice), and LLM tokens when an LLM is used.

Every trial is committed to the store as it happens (`trials`, migration 3). Running the same
command again resumes: trials already recorded are replayed from the store in order (no gate
call, no LLM call), and the loop goes on from where it stopped; a larger --budget continues a
finished run.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from klineage.config import GateConfig
from klineage.errors import KLineageError, LoadError, UsageError
from klineage.gate import GateResult, run_gate
from klineage.gate.records import Overrides, profile_rows
from klineage.gate.request import Event
from klineage.lineage.walk import candidate_file, sha
from klineage.llm.base import LLMBackend
from klineage.metrics import geomean
from klineage.optimize.decide import speedup, timed_regimes
from klineage.optimize.materialize import LLMMaterializer, Materialized, mechanical
from klineage.optimize.policies import CPU_CONFIGS, Context, Proposal, get_policy, table_size
from klineage.optimize.summary import RegimeSummary, RunSummary
from klineage.optimize.trials import State, TrialRecorder
from klineage.problem.loader import check_overrides, read_source
from klineage.problem.shapes import features
from klineage.skills.conditions import problem_shapes, shapes_of
from klineage.skills.model import Skill
from klineage.store import Store
from klineage.store.db import TrialRow

# The loop's progress, by kind ("start", "resume", "gating", "trial"), for a caller to show
# (gate/request.py: Event).
EventCallback = Callable[[str, Event], None]

# Part of every run's identity. Bump it when what a policy proposes or what a materializer
# writes changes, so a stored run of the older code is not replayed as if it were this one's;
# what each version changed is in docs/OPTIMIZE.md ("Versions").
OPTIMIZE_VERSION = 13


class OptimizeRefused(KLineageError):
    """The starting kernel fails the gate: there is nothing correct to optimize from."""


@dataclass
class Settings:
    budget: int = 10
    margin: float = 0.03
    max_tokens: int | None = None  # total LLM tokens (in + out) the run may use
    regimes: list[str] = field(default_factory=list)
    # --set NAME=VALUE: problem globals rebound for every gate call (gate/runner.py).
    overrides: Overrides = field(default_factory=dict)
    seed: int = 0
    repair: bool = True
    llm_timeout_s: float = 300.0


class Optimizer:
    def __init__(
        self,
        store: Store,
        problem: Path,
        kernel: Path,
        *,
        skills: list[Skill],
        device: str,
        policy: str,
        settings: Settings,
        config: GateConfig | None,
        llm: LLMBackend | None,
        on_event: EventCallback | None,
        capability: str | None = None,
        memory: Any = None,
    ) -> None:
        self.store, self.problem, self.kernel = store, problem, kernel
        self.skills, self.device, self.settings = skills, device, settings
        self.policy = get_policy(policy)
        if self.policy.name == "llm-feedback" and llm is None:
            raise UsageError("--policy llm-feedback needs an LLM: pass --llm SPEC")
        self.llm = (
            LLMMaterializer(llm, timeout_s=settings.llm_timeout_s) if llm is not None else None
        )
        self.llm_name = llm.name if llm is not None else ""
        # Candidates are gated strictly (an LLM's file is untrusted); torch.compile is timed
        # once, on the starting kernel, for the summary.
        base = config or GateConfig()
        # The start is the user's correct kernel: it is not flagged for being much faster than
        # eager (fusions are); candidates are flagged when much faster than the start (below).
        self.start_config = base.model_copy(update={"max_speedup_vs_reference": 1e12})
        self.config = base.model_copy(update={"profile_compile": False})
        self.capability = capability
        self.memory = memory
        self.emit = on_event or (lambda kind, data: None)
        self.problem_src, self.kernel_src = read_source(problem), read_source(kernel)
        self.shapes = shapes = problem_shapes(problem, settings.overrides)
        self.target = {r: features(e) for r, e in shapes.items()}
        self.regime_text = "\n".join(
            f"- {r}: inputs {e['shapes']} {e['dtypes']}" for r, e in shapes.items()
        )
        # On a GPU, speed is judged on the regimes sized for it (not the interpreter's tiny ones).
        self.timed = timed_regimes(self.problem_src, settings.regimes or list(shapes), device)
        if self.timed:
            # Skills are matched to the regimes the run is judged on: on a GPU not the
            # interpreter's tiny ones (a threshold met only there predicted gains nowhere timed).
            self.target = {r: f for r, f in self.target.items() if r in self.timed}
        self.run_id = self._run_id()

    def _run_id(self) -> str:
        blob = json.dumps(
            [
                OPTIMIZE_VERSION,
                sha(self.problem_src),
                sha(self.kernel_src),
                self.device,
                self.policy.name,
                sorted(s.id + sha(s.model_dump_json())[:8] for s in self.skills),
                self.llm_name,
                sorted(self.settings.regimes),
                self.settings.margin,
                self.settings.seed,
                self.memory.fingerprint() if self.memory is not None else None,
            ]
            # A run at other --set sizes is another run; none keeps older ids.
            + (
                [sorted((k, repr(v)) for k, v in self.settings.overrides.items())]
                if self.settings.overrides
                else []
            )
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # gate ---------------------------------------------------------------------------------

    def gate(self, source: str, config: GateConfig, base: str | None = None) -> GateResult:
        """Gate `source`; on a GPU, timed beside `base` (the best so far) for side-by-side ratios."""
        return run_gate(
            self.problem,
            candidate_file(source),
            device=self.device,
            regimes=self.settings.regimes or None,
            overrides=self.settings.overrides,
            config=config,
            base=candidate_file(base) if base is not None and self.device == "cuda" else None,
        )

    # the run ------------------------------------------------------------------------------

    def run(self, fresh: bool = False) -> RunSummary:
        s = self.settings
        if fresh and self.store.get_run(self.run_id) is not None:
            self.store.delete_run(self.run_id)
        row = self.store.get_run(self.run_id)
        settings_json = {
            "budget": s.budget,
            "margin": s.margin,
            "max_tokens": s.max_tokens,
            "regimes": s.regimes,
            "seed": s.seed,
            "llm": self.llm_name,
            "skills": len(self.skills),
            "timed": self.timed,
            "overrides": s.overrides,
        }
        if row is None:
            self.store.create_run(
                self.run_id,
                str(self.problem),
                str(self.kernel),
                sha(self.problem_src),
                sha(self.kernel_src),
                self.device,
                self.policy.name,
                settings_json,
            )
            row = self.store.get_run(self.run_id)
        assert row is not None
        if row.status == "refused":
            raise OptimizeRefused(row.stop_reason)
        if row.start_gate is None:
            self.emit("start", {"id": self.run_id})
            g = self.gate(self.kernel_src, self.start_config)
            if not g.accepted:
                reason = f"the starting kernel {self.kernel} fails the gate: {g.message}"
                self.store.update_run(
                    self.run_id,
                    status="refused",
                    stop_reason=reason,
                    start_gate=g.model_dump(mode="json"),
                )
                raise OptimizeRefused(reason)
            self.store.update_run(self.run_id, start_gate=g.model_dump(mode="json"))
            start_gate = g.model_dump(mode="json")
        else:
            start_gate = row.start_gate
            self.emit("resume", {"id": self.run_id, "trials": len(self.store.trials(self.run_id))})
        self.store.update_run(self.run_id, status="running", settings=settings_json)
        # "Suspiciously fast" for a candidate: more than max_speedup_vs_reference (10x) faster
        # than the start, when the start itself is already faster than eager.
        s0 = max(
            (r.speedup_vs_eager or 1.0 for r in profile_rows(start_gate).values()), default=1.0
        )
        limit = max(self.config.max_speedup_vs_reference, self.config.max_speedup_vs_reference * s0)
        self.config = self.config.model_copy(update={"max_speedup_vs_reference": limit})
        st = State(self.kernel_src, start_gate, seen={sha(self.kernel_src): 0})
        st.curve.append((0, 1.0))
        self.start_gate = start_gate
        ctx = Context(
            self.problem,
            self.kernel,
            self.device,
            self.skills,
            self.llm is not None,
            s.seed,
            self.target,
            self.capability,
            st.best_source,
            memory=self.memory,
            shapes=shapes_of(self.shapes),
            configs=(
                table_size(self.config.configs_per_call, self.config.timeout_s, start_gate)
                if self.device == "cuda"
                else CPU_CONFIGS
            ),
        )
        trials = TrialRecorder(
            self.store,
            self.run_id,
            {t.seq: t for t in self.store.trials(self.run_id)},
            gate=lambda source, base: self.gate(source, self.config, base),
            device=self.device,
            timed=self.timed,
            margin=s.margin,
            start_gate=start_gate,
            emit=self.emit,
        )
        reason = self._loop(ctx, st, trials)
        summary = self.summary(st, reason)
        self.store.update_run(self.run_id, status="done", stop_reason=reason, summary=summary)
        self.emit("done", {"id": self.run_id, "reason": reason})
        return summary

    def _loop(self, ctx: Context, st: State, trials: TrialRecorder) -> str:
        s = self.settings
        proposals: Iterator[Proposal] = self.policy.proposals(ctx)
        while True:
            if st.gate_calls >= s.budget:
                return f"budget of {s.budget} gate calls spent"
            if s.max_tokens is not None and st.tokens >= s.max_tokens:
                return f"budget of {s.max_tokens} LLM tokens spent"
            ctx.best_source, ctx.last_accepted = st.best_source, st.last_accepted
            ctx.gains[sha(st.best_source)] = st.curve[-1][1] if st.curve else 1.0
            try:
                prop = next(proposals)
            except StopIteration:
                retry = self._retry(st)
                if retry is None:
                    return (
                        "no proposal left (every retrieved skill tried)"
                        if self.policy.knowledge != "none"
                        else "no proposal left"
                    )
                prop = retry
            self._try(prop, st, trials, ctx)

    def _retry(self, st: State) -> Proposal | None:
        """With budget left after the policy's last proposal: a mechanical proposal that was
        correct but not faster, again on a best kernel that has changed since (on the H200,
        exp2 gave 1.02x on a naive attention kernel and 1.2x once its tiles were doubled).
        Each at most once per best kernel, in the order first tried; GPU only (on the CPU the
        verdict is the skill's prediction, which the kernel does not change)."""
        if self.device != "cuda":
            return None
        best = sha(st.best_source)
        for i, (prop, base) in enumerate(st.retry):
            if base != best:
                st.retry[i] = (prop, best)
                label = (prop.what or prop.label) + " [again, on the new best kernel]"
                return replace(prop, label=label)
        return None

    def _try(self, prop: Proposal, st: State, trials: TrialRecorder, ctx: Context) -> None:
        ctx.last_trial, st.last_trial = None, None
        before = st.best_source
        self._tried(prop, st, trials, ctx)
        t = st.last_trial
        if self.device == "cuda" and t is not None and t.gated and t.accepted and t.candidate:
            from klineage.metrics import speedups
            from klineage.optimize.dispatch import DISPATCH, TrialView

            ratios = {r: v for r, v in speedups(None, t.gate).items() if r in self.timed}
            ctx.last_trial = TrialView(
                t.candidate, before, t.kept, ratios, prop.pass_name == DISPATCH
            )

    def _tried(self, prop: Proposal, st: State, trials: TrialRecorder, ctx: Context) -> None:
        if prop.materializer == "llm" and self.llm is None:
            trials.record(st, prop, "llm", Materialized(None, "needs an LLM (--llm) to be written"))
            return
        if prop.materializer == "mechanical":
            base_sha = sha(st.best_source)
            m = trials.replayed(st, prop, "mechanical") or mechanical(
                prop.source or st.best_source, prop.pass_name or "", prop.params, then=prop.then
            )
            t = trials.record(st, prop, "mechanical", m)
            known = [i for i, (q, _) in enumerate(st.retry) if q.key == prop.key]
            if t is not None and t.kept and known:  # in the kernel now: never again
                del st.retry[known[0]]
            elif t is not None and t.accepted and not t.kept and not known and not prop.source:
                st.retry.append((prop, base_sha))
            # The rewrite did not fit this code (its sites need what the expert had): with an
            # LLM, a skill (not a bare pass) is written by the LLM instead.
            if m.source is not None or self.llm is None or prop.skill is None:
                return
            if self.settings.budget <= st.gate_calls:
                return
        assert self.llm is not None
        replay = trials.replayed(st, prop, "llm")
        m = replay or self.llm.propose(
            self.problem_src, st.best_source, prop.skill, self.regime_text, st.feedback, prop.notes
        )
        if replay is not None:  # rebuild the conversation for a repair turn
            from klineage.llm.base import Message
            from klineage.optimize.materialize import build_prompt

            m.messages = [
                *build_prompt(
                    self.problem_src,
                    st.best_source,
                    prop.skill,
                    self.regime_text,
                    st.feedback,
                    prop.notes,
                ),
                Message("assistant", replay.reply or ""),
            ]
        base = st.best_source
        trial = trials.record(st, prop, "llm", m)
        if (
            trial is not None
            and trial.gated
            and not trial.accepted
            and self.settings.repair
            and st.gate_calls < self.settings.budget
            and st.best_source == base
        ):
            r = trials.replayed(st, prop, "llm-repair") or self.llm.repair(m, trial.message)
            trials.record(st, prop, "llm-repair", r)

    # the result ---------------------------------------------------------------------------

    def summary(self, st: State, reason: str) -> RunSummary:
        trials = self.store.trials(self.run_id)
        start_rows = profile_rows(self.start_gate)
        best_rows = profile_rows(st.best_gate)
        per_regime: dict[str, RegimeSummary] = {}
        # Start and best were timed in different gate calls: medians of the two, with their range.
        overall = speedup(self.start_gate, st.best_gate, self.timed)
        for r in self.timed:
            a, b = start_rows.get(r), best_rows.get(r)
            if a is not None and b is not None and a.kernel_ms and b.kernel_ms:
                per_regime[r] = {
                    "start_ms": a.kernel_ms,
                    "best_ms": b.kernel_ms,
                    "speedup": a.kernel_ms / b.kernel_ms,
                    "launch_bound": bool(r in overall and overall[r].launch_bound),
                    "status": overall[r].status if r in overall else "not measured",
                    "vs_eager": a.eager_ms / b.kernel_ms if a.eager_ms else None,
                    "vs_compile": a.compile_ms / b.kernel_ms if a.compile_ms else None,
                    "pct_of_floor": 100.0 * b.floor_ms / b.kernel_ms if b.floor_ms else None,
                }
        measured = bool(per_regime)
        applied = [t for t in trials if t.kept]
        return {
            "run_id": self.run_id,
            "problem": str(self.problem),
            "kernel": str(self.kernel),
            "device": self.device,
            "policy": self.policy.name,
            "llm": self.llm_name or None,
            "stop_reason": reason,
            "measured": measured,
            "label": "measured" if measured else "predicted, not measured",
            "gate_calls": st.gate_calls,
            "budget": self.settings.budget,
            "tokens": st.tokens,
            "trials": len(trials),
            "applied": [
                {
                    "seq": t.seq,
                    "proposal": t.proposal,
                    "label": t.label,
                    "materializer": t.materializer,
                    "speedup": t.speedup,
                    "predicted": t.predicted,
                    "message": t.message,
                }
                for t in applied
            ],
            "speedup": geomean(v["speedup"] for v in per_regime.values() if not v["launch_bound"])
            if measured
            else None,
            "predicted": _predicted_total(applied) if not measured else None,
            "regimes": per_regime,
            "curve": st.curve,
            "best_source": st.best_source,
            "environment": (st.best_gate.get("environment") or {}),
        }


def _predicted_total(applied: list[TrialRow]) -> float | None:
    xs = [t.predicted for t in applied if t.predicted]
    return math.prod(xs) if xs else None


def optimize(
    problem: str | Path,
    kernel: str | Path,
    *,
    store: Store,
    skills: list[Skill],
    device: str = "cpu",
    policy: str = "klineage",
    settings: Settings | None = None,
    config: GateConfig | None = None,
    llm: LLMBackend | None = None,
    capability: str | None = None,
    fresh: bool = False,
    on_event: EventCallback | None = None,
    memory: Any = None,
) -> RunSummary:
    """Optimize `kernel` for `problem`; returns the run summary (also stored, with every trial)."""
    settings = settings or Settings()
    if settings.budget < 1:
        raise UsageError("--budget must be at least 1 gate call")
    if not 0 <= settings.margin < 1:
        raise UsageError("--margin must be in [0, 1), e.g. 0.03 for 3%")
    problem_path, kernel_path = Path(problem).resolve(), Path(kernel).resolve()
    for p in (problem_path, kernel_path):
        if not p.exists():
            raise LoadError(str(p), "file not found", expected="a Python file")
    check_overrides(problem_path, settings.overrides)
    opt = Optimizer(
        store,
        problem_path,
        kernel_path,
        skills=skills,
        device=device,
        policy=policy,
        settings=settings,
        config=config,
        llm=llm,
        on_event=on_event,
        capability=capability,
        memory=memory,
    )
    return opt.run(fresh=fresh)
