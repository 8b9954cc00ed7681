"""One trial of an optimize run, from a materialized candidate to its stored outcome: replayed
from the store when the run resumes, else gated (an identical candidate is not gated twice) and
judged against the best kernel so far; committed as it happens, then applied to the run's State
(budget spent, feedback, best kernel, anytime curve)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from klineage.errors import KLineageError
from klineage.gate import GateResult
from klineage.gate.request import Event
from klineage.lineage.walk import sha
from klineage.optimize.decide import _curve_point, folded, keep_decision, speedup
from klineage.optimize.materialize import Materialized
from klineage.optimize.policies import Proposal
from klineage.skills.conditions import PAYS_OFF
from klineage.store import Store
from klineage.store.db import TrialRow


@dataclass
class State:
    """Where a run stands between trials: the best kernel so far and what has been spent."""

    best_source: str
    best_gate: dict[str, Any]
    gate_calls: int = 0
    tokens: int = 0
    seq: int = 0
    feedback: str = ""
    seen: dict[str, int] = field(default_factory=dict)  # candidate sha -> trial seq
    curve: list[tuple[int, float]] = field(default_factory=list)  # (gate calls, speedup vs start)
    # Correct-but-not-faster mechanical proposals, with the best kernel they were last tried on.
    retry: list[tuple[Proposal, str]] = field(default_factory=list)
    last_accepted: bool = False  # whether the last trial's candidate passed the gate
    last_trial: TrialRow | None = None  # the last trial recorded (replayed or gated)


class TrialRecorder:
    """Records the trials of run `run_id` in order. `prior` holds the trials an earlier
    invocation stored, by seq: each is replayed (no gate call, no LLM call) before anything new
    is gated; `gate(source, base)` gates a candidate beside the best kernel so far."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        prior: dict[int, TrialRow],
        *,
        gate: Callable[[str, str], GateResult],
        device: str,
        timed: list[str],
        margin: float,
        start_gate: dict[str, Any],
        emit: Callable[[str, Event], None],
    ) -> None:
        self.store, self.run_id, self.prior = store, run_id, prior
        self.gate, self.device, self.timed, self.margin = gate, device, timed, margin
        self.start_gate, self.emit = start_gate, emit

    def replayed(self, st: State, prop: Proposal, materializer: str) -> Materialized | None:
        """The stored candidate of the next trial, in place of materializing it again; None when
        the run has gone past what is stored. Raises if the stored trial is another proposal."""
        t = self.prior.get(st.seq + 1)
        if t is None:
            return None
        if (
            t.proposal != prop.key
            or t.materializer != materializer
            or t.base_sha != sha(st.best_source)
        ):
            raise KLineageError(
                f"run {self.run_id}: the stored trajectory diverges at trial {t.seq} (stored {t.proposal} "
                f"{t.materializer}, now {prop.key} {materializer}); rerun with --fresh to start over"
            )
        return Materialized(t.candidate, t.message, 0, t.tokens_in, t.tokens_out, t.reply)

    def record(
        self, st: State, prop: Proposal, materializer: str, m: Materialized
    ) -> TrialRow | None:
        """The next trial (seq st.seq + 1): replayed if stored, else gated, judged and committed;
        `st` is updated with its outcome either way."""
        st.seq += 1
        st.tokens += m.tokens_in + m.tokens_out
        base_sha = sha(st.best_source)
        stored = self.prior.get(st.seq)
        if stored is not None:  # replay: the outcome is in the store
            self._apply(st, stored)
            self.emit("trial", {"replayed": True, **self._event(stored, prop)})
            return stored
        t0 = time.perf_counter()
        fields: dict[str, Any] = {
            "tokens_in": m.tokens_in,
            "tokens_out": m.tokens_out,
            "reply": m.reply,
            "predicted": prop.predicted,
        }
        if m.source is None:
            fields["message"] = m.reason
        elif sha(m.source) in st.seen:
            fields.update(
                candidate=m.source,
                candidate_sha=sha(m.source),
                message=f"same kernel as trial {st.seen[sha(m.source)]}; not gated again",
            )
        else:
            self.emit("gating", {"seq": st.seq, "label": prop.label, "materializer": materializer})
            g = self.gate(m.source, st.best_source)
            gate = g.model_dump(mode="json")
            fields.update(
                candidate=m.source,
                candidate_sha=sha(m.source),
                gated=True,
                accepted=g.accepted,
                gate=gate,
                failed_stage=g.failed_stage.value if g.failed_stage else None,
                message=(m.reason if g.accepted else g.message),
            )
            if g.accepted:
                fields.update(self._judge(st, gate, prop))
        fields["seconds"] = time.perf_counter() - t0
        self.store.add_trial(
            self.run_id,
            st.seq,
            prop.key,
            prop.label,
            prop.skill.id if prop.skill else None,
            materializer,
            base_sha,
            **fields,
        )
        trial = next(t for t in self.store.trials(self.run_id) if t.seq == st.seq)
        self._apply(st, trial)
        self.emit("trial", {"replayed": False, **self._event(trial, prop)})
        return trial

    def _judge(self, st: State, gate: dict[str, Any], prop: Proposal) -> dict[str, Any]:
        """Whether an accepted candidate becomes the new best, and by how much it is faster."""
        if self.device == "cuda":
            return keep_decision(speedup(st.best_gate, gate, self.timed), self.margin)
        kept = prop.predicted is not None and prop.predicted >= PAYS_OFF
        return {
            "kept": kept,
            "message": (
                f"kept (predicted, not measured): the skill predicts {prop.predicted:.2f}x"
                if kept
                else "correct; no predicted gain, so not kept (nothing is timed on the CPU)"
            ),
        }

    def _apply(self, st: State, t: TrialRow) -> None:
        st.last_trial = t
        st.last_accepted = bool(t.gated and t.accepted)
        if t.gated:
            st.gate_calls += 1
            st.feedback = "accepted" if t.accepted else t.message
            if t.candidate_sha:
                st.seen.setdefault(t.candidate_sha, t.seq)
        if t.kept and t.candidate and t.gate:
            st.best_source, st.best_gate = folded(t.candidate, t.gate)
        if t.gated:
            st.curve.append(
                (st.gate_calls, _curve_point(speedup(self.start_gate, st.best_gate, self.timed)))
            )

    @staticmethod
    def _event(t: TrialRow, prop: Proposal) -> dict[str, Any]:
        return {
            "seq": t.seq,
            "label": prop.label,
            "materializer": t.materializer,
            "gated": t.gated,
            "accepted": t.accepted,
            "kept": t.kept,
            "speedup": t.speedup,
            "message": t.message,
        }
