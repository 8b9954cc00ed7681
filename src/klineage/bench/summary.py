"""A bench's summary per policy, from its rows: the one definition, used by the bench when it
writes bench.json and by the report for a file that lacks a policy's summary (or a field of it
added since, such as anytime_mean)."""

from __future__ import annotations

from typing import Any

from klineage.bench.records import BenchRow, PolicySummary
from klineage.metrics import IMPROVED, anytime, anytime_mean, geomean


def summarize(rows: list[BenchRow], policies: list[str]) -> dict[str, PolicySummary]:
    """Per policy with rows: its geomeans (a failed run counts 1.0x), success rate, problems
    improved, mean calls to 95% and the anytime curve over one horizon for every policy."""
    out: dict[str, PolicySummary] = {}
    # One horizon for every policy: the longest run's candidate calls.
    n_max = max((c for r in rows for c, _ in r.curve), default=0)
    for p in policies:
        mine = [r for r in rows if r.policy == p]
        if not mine:
            continue
        c95 = [r.calls_to_95 for r in mine if r.calls_to_95 is not None]
        # Several seeds of one problem: the problem's result is the geomean over its seeds.
        per_problem: dict[str, list[float]] = {}
        for r in mine:
            per_problem.setdefault(r.problem, []).append(r.speedup or 1.0)
        summary: dict[str, Any] = {
            "problems": len(per_problem),
            "runs": len(mine),
            "success_rate": sum(bool(r.success) for r in mine) / len(mine),
            # A failed run counts as no gain (1.0x), not as missing: failing is not free.
            "geomean_speedup": geomean([r.speedup or 1.0 for r in mine])
            if any(r.speedup for r in mine)
            else None,
            "geomean_vs_eager": geomean([r.vs_eager for r in mine]),
            "geomean_vs_compile": geomean([r.vs_compile for r in mine]),
            "geomean_fraction_of_expert": geomean([r.fraction_of_expert for r in mine]),
            "mean_calls_to_95": sum(c95) / len(c95) if c95 else None,
            "improved": sum(1 for v in per_problem.values() if (geomean(v) or 1.0) >= IMPROVED),
        }
        if n_max:
            curves = [r.curve for r in mine]
            summary["anytime"] = anytime(curves, range(1, n_max + 1))
            summary["anytime_mean"] = anytime_mean(curves, n_max)
        # Validated from the dict, so the keys set are the ones written (exclude_unset).
        out[p] = PolicySummary.model_validate(summary)
    return out
