"""The one sentence a skill card leads with: when the optimization pays, from evidence only.

Built from the effects that count (skills/extract.py `pays`: beyond their spread, not
launch-bound, not old timing, on code that ran), the thresholds learned from them, and the
simplifications the gate rejected. Regimes are named by shape and dtype, not by their names in
a problem file. Evidence that disagrees across lineages is said once, as mixed, with its range.
"""

from __future__ import annotations

from pathlib import Path

from klineage.metrics import PAYS_OFF
from klineage.skills.conditions import regime_features
from klineage.skills.extract import pays
from klineage.skills.model import Effect, Skill

SHOWN = 4  # regimes named in a list before "and N more"


def regime_label(skill: Skill, e: Effect) -> str:
    """'65536x64 bfloat16' (rows x row length), or the regime's name where its shape is unknown."""
    problem = next((p.problem for p in skill.provenance if p.lineage_id == e.lineage_id), None)
    feats = regime_features(problem).get(e.regime, {}) if problem else {}
    if "rows" in feats and "row_length" in feats:
        shape = f"{int(feats['rows'])}x{int(feats['row_length'])}"
    else:
        shape = e.regime
    return f"{shape} {e.dtype}" if e.dtype else shape


def _listed(labels: list[str]) -> str:
    unique = list(dict.fromkeys(labels))
    shown = ", ".join(unique[:SHOWN])
    return shown + (f" and {len(unique) - SHOWN} more" if len(unique) > SHOWN else "")


def _range(effects: list[Effect]) -> str:
    xs = [e.speedup for e in effects if e.speedup is not None]
    lo, hi = min(xs), max(xs)
    return f"{lo:.2g}x" if abs(hi - lo) < 0.05 * lo else f"{lo:.2g}-{hi:.2g}x"


def when(skill: Skill) -> str:
    """When it pays, in one sentence; says plainly when nothing was measured."""
    yes = [e for e in skill.effects if pays(e) is True]
    no = [e for e in skill.effects if pays(e) is False]
    gpus = sorted({(e.gpu or "?").removeprefix("NVIDIA ") for e in yes + no})
    label = {id(e): regime_label(skill, e) for e in yes + no}
    mixed = {label[id(e)] for e in yes} & {label[id(e)] for e in no}

    def listed(effects: list[Effect]) -> str:
        return _listed([label[id(e)] for e in effects])

    parts: list[str] = []
    pay_only = [e for e in yes if label[id(e)] not in mixed]
    if pay_only:
        parts.append(f"pays {_range(pay_only)} on {listed(pay_only)}")
    not_yes = [e for e in no if label[id(e)] not in mixed]
    costs = [e for e in not_yes if e.status == "measured" and (e.speedup or 1.0) * PAYS_OFF <= 1.0]
    flat = [e for e in not_yes if e not in costs]
    if flat:
        parts.append(f"no gain on {listed(flat)}")
    if costs:
        parts.append(f"slower ({_range(costs)}) on {listed(costs)}")
    if mixed:
        both = [e for e in yes + no if label[id(e)] in mixed]
        parts.append(f"mixed on {_listed(sorted(mixed))} ({_range(both)} across lineages)")
    rules = sorted(
        {
            c.predicate.removeprefix("pays off ")
            for c in skill.conditions
            if c.kind == "measured" and c.feature and c.threshold is not None
        }
    )
    if rules and (yes or no):
        parts.append("learned: pays " + "; ".join(rules))
    unsafe = len(skill.failures_avoided)
    tail = (
        f" The gate rejected {unsafe} simplification(s) of it: its form is needed for correctness there."
        if unsafe
        else ""
    )
    if not parts:
        old = sum(1 for e in skill.effects if e.status == "old timing")
        why = (
            f"its {old} effect(s) predate side-by-side device timing"
            if old
            else "no effect of it cleared its measured spread"
        )
        return (
            f"No measured condition: {why}; whether it pays here is for the gate to measure.{tail}"
        )
    return f"{'; '.join(parts)} ({', '.join(gpus)}).{tail}"


def short_path(path: str) -> str:
    """A path without the machine it was distilled on: its last two parts."""
    p = Path(path)
    return str(Path(p.parent.name) / p.name) if p.parent.name else p.name
