"""Every metric's one definition: speedups between two gate results, the geomean, what pays
off, and the bench's measures of a run (calls to 95% of its final gain, the anytime curve).

A speedup is base time / new time per regime (> 1: new is faster). Where the new result was
gated with the base beside it (run_gate(base=...)), it is the side-by-side ratio of that call,
with its per-round range. Otherwise it is the ratio of two calls' medians, with the range from
their p20/p80: honest, but wider, and at whatever clocks each call ran.

A speedup is evidence only when its regime is not launch-bound and its range excludes 1;
otherwise callers record it as "within noise" or "launch-bound" and never count it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from klineage.gate.records import GateJSON, profile_rows, within_noise

# What "pays off" means everywhere (skills, retrieval, the report): 5% or more.
PAYS_OFF = 1.05
# A bench problem counts as improved at 3% or more: the optimize loop's default keep margin
# (optimize.Settings.margin = 0.03), so "improved" means a policy kept at least one step.
IMPROVED = 1.03
# Calls to 95%: how soon a run had most of its final gain.
CALLS_TO_FRACTION = 0.95

# A run's curve: (gate calls, best speedup so far) points; point 0 is the start's gate (1.0).
CurvePoint = tuple[float, float] | Sequence[float]


@dataclass(frozen=True)
class Speedup:
    regime: str
    value: float
    lo: float
    hi: float
    base_ms: float
    new_ms: float
    side_by_side: bool
    launch_bound: bool
    basis: str  # "device", "host", or "old" (rows of the old host-inclusive do_bench timing)

    @property
    def within_noise(self) -> bool:
        return within_noise(self.value, self.lo, self.hi)

    @property
    def evidence(self) -> bool:
        """Counts for a decision or a learned condition."""
        return self.status == "measured"

    @property
    def status(self) -> str:
        if self.basis == "old":
            return "old timing"
        if self.launch_bound:
            return "launch-bound"
        if self.within_noise:
            return "within noise"
        return "measured"


def speedups(base_gate: GateJSON | None, new_gate: GateJSON | None) -> dict[str, Speedup]:
    """Per regime timed in both: base / new. The side-by-side ratio of new_gate is used only
    when it was measured against base_gate's kernel (new_gate.base_sha is base_gate's
    candidate_sha), or when base_gate is None (against whatever base new_gate was timed
    beside); otherwise the two calls' medians are compared."""
    new = profile_rows(new_gate or {})
    base = profile_rows(base_gate or {})
    paired = base_gate is None or (
        bool((new_gate or {}).get("base_sha"))
        and (new_gate or {}).get("base_sha") == base_gate.get("candidate_sha")
    )
    out: dict[str, Speedup] = {}
    for regime, row in new.items():
        if (
            paired
            and row.ratio is not None
            and row.base_ms is not None
            and row.ratio_lo is not None
            and row.ratio_hi is not None
        ):
            out[regime] = Speedup(
                regime,
                row.ratio,
                row.ratio_lo,
                row.ratio_hi,
                row.base_ms,
                row.kernel_ms,
                True,
                row.launch_bound,
                row.basis,
            )
            continue
        b = base.get(regime)
        if b is None or row.kernel_ms <= 0 or b.basis != row.basis:
            continue
        lo = b.kernel_p20_ms / max(row.kernel_p80_ms, 1e-12)
        hi = b.kernel_p80_ms / max(row.kernel_p20_ms, 1e-12)
        out[regime] = Speedup(
            regime,
            b.kernel_ms / row.kernel_ms,
            min(lo, hi),
            max(lo, hi),
            b.kernel_ms,
            row.kernel_ms,
            False,
            row.launch_bound or b.launch_bound,
            row.basis,
        )
    return out


def inverse(s: Speedup) -> Speedup:
    """The same measurement read the other way (new / base)."""
    return Speedup(
        s.regime,
        1.0 / s.value,
        1.0 / s.hi,
        1.0 / s.lo,
        s.new_ms,
        s.base_ms,
        s.side_by_side,
        s.launch_bound,
        s.basis,
    )


def geomean(xs: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive finite values (None: not measured, skipped); None when
    there are none."""
    vals = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    if not vals:
        return None
    return math.exp(sum(math.log(x) for x in vals) / len(vals))


def timed_geomean(xs: dict[str, Speedup], regimes: Iterable[str] | None = None) -> float | None:
    """Geomean over the regimes that are not launch-bound (and in `regimes`, when given)."""
    keep = set(regimes) if regimes is not None else None
    return geomean(
        s.value for r, s in xs.items() if not s.launch_bound and (keep is None or r in keep)
    )


# --------------------------------------------------------------------------- bench runs


def calls_to_95(curve: Sequence[CurvePoint]) -> int | None:
    """Gate calls until the best-so-far speedup first reached 95% of the final best's gain
    (None when nothing was gained)."""
    if not curve:
        return None
    final = curve[-1][1]
    if final <= 1.0:
        return None
    target = 1.0 + CALLS_TO_FRACTION * (final - 1.0)
    return int(next(c for c, s in curve if s >= target))


def best_after(curve: Sequence[CurvePoint], n: float) -> float:
    """The best speedup after n gate calls: the best of the curve's points at or before n, and
    never under 1.0 (the naive start, which is what a run with no curve, a failed one, has)."""
    return max([1.0] + [float(s) for c, s in curve if c <= n])


def anytime(curves: Sequence[Sequence[CurvePoint]], calls: Iterable[int]) -> list[float]:
    """Geomean over runs of the best speedup after each n in `calls` gate calls (a failed run,
    with no curve, counts 1.0x): how fast a policy gains, which a final speedup hides once
    every policy has tried everything that applies. The bench's summary takes n = 1..N (the
    candidate calls); the report draws n = 0..budget, the start included."""
    return [geomean(best_after(c, n) for c in curves) or 1.0 for n in calls]


def anytime_mean(curves: Sequence[Sequence[CurvePoint]], n_max: int) -> float | None:
    """The anytime curve over 1..n_max candidate calls, averaged (None without a horizon)."""
    if not curves or n_max < 1:
        return None
    curve = anytime(curves, range(1, n_max + 1))
    return sum(curve) / len(curve)
