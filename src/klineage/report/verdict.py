"""What the report claims, computed from the bench (a BenchFile): each policy's summary, the
headline verdict, the spread across seeds, and why a value is missing where it is.

Plain text out (the page escapes it), so each piece is testable on made-up rows.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping

from klineage.bench.records import BenchFile, BenchRow, PolicySummary
from klineage.bench.summary import summarize
from klineage.metrics import PAYS_OFF, geomean
from klineage.report.values import _policies, as_bench, row_number

SUITE_NAMES = {"heldout": "held-out", "corpus": "corpus"}
# The policy whose claim the headline states; the others are its baselines.
MAIN_POLICY = "klineage"


# --------------------------------------------------------------------------- summaries


def policy_summary(bench: BenchFile, policy: str) -> tuple[PolicySummary, bool]:
    """The producer's summary for a policy, or one computed from the rows (second item True),
    both by the bench's own summarize: the report recomputes no metric of its own. A summary
    written before anytime_mean existed gets it the same way (over the bench's horizon)."""
    given = bench.summary.get(policy)
    computed = summarize(bench.rows, [policy]).get(policy, PolicySummary())
    if given is not None:
        if "anytime_mean" not in given.model_fields_set:  # written before the bench had it
            given = given.model_copy(update={"anytime_mean": computed.anytime_mean})
        return given, False
    return computed, True


# --------------------------------------------------------------------------- seeds


def seed_spread(rows: list[BenchRow]) -> tuple[float, float] | None:
    """(min, max) final speedup over the seeds of one (problem, policy); None under two seeds.
    A failed seed counts 1.0x, as in the bench's geomeans."""
    by_seed = {r.seed: r.speedup or 1.0 for r in rows if _counted(r)}
    if len(by_seed) < 2:
        return None
    return min(by_seed.values()), max(by_seed.values())


def _counted(r: BenchRow) -> bool:
    return not r.predicted or r.success is False


def seed_geomeans(bench: BenchFile, policy: str) -> list[float]:
    """Per seed, the geomean over problems of the policy's final speedup (failed: 1.0x); empty
    unless the policy ran under two or more seeds."""
    rows = [r for r in bench.rows if r.policy == policy and r.seed is not None]
    seeds = sorted({r.seed for r in rows}, key=str)
    if len(seeds) < 2:
        return []
    out = []
    for sd in seeds:
        g = geomean(r.speedup or 1.0 for r in rows if r.seed == sd)
        if g is not None:
            out.append(g)
    return out


def spread_band(bench: BenchFile, policies: list[str]) -> tuple[float, str]:
    """The ratio two policies' geomeans must differ by to call one ahead, and what it is: the
    widest range of a policy's geomean across seeds, never under the 5% that counts as paying
    off elsewhere (docs/SKILLS.md)."""
    widest = max(
        ((max(g) / min(g), p) for p in policies if len(g := seed_geomeans(bench, p)) > 1),
        default=None,
    )
    if widest is not None and widest[0] > PAYS_OFF:
        return widest[0], f"{_pct_text(widest[0])}, {widest[1]}'s range across seeds"
    if widest is not None:
        return PAYS_OFF, "5%: the seeds varied less than the pays-off threshold"
    return PAYS_OFF, "5%; one seed, so no spread was measured"


def _pct_text(ratio: float) -> str:
    return f"{100 * (ratio - 1):.0f}%"


# --------------------------------------------------------------------------- headline


def headline(data: BenchFile | Mapping[str, object]) -> str:
    """One to three sentences: the main policy's geomean over the naive starts, against the
    best baseline, within or beyond the spread; who gains fastest; torch.compile."""
    bench = as_bench(data)
    rows = bench.rows
    if not rows:
        return "No results in this bench."
    device = bench.device or "?"
    measured = [r for r in rows if not r.predicted]
    ok = sum(1 for r in rows if r.success)
    if not ok:
        return (
            f"No run finished with a correct kernel: all {len(rows)} failed (their errors are in "
            "the problems section), so this page claims no speedup."
        )
    if not any(r.speedup is not None for r in measured):
        where = "the CPU" if device == "cpu" else f"device {device}"
        return (
            f"Predicted, not measured ({where}): no kernel was timed, so this page claims no "
            f"speedup; {ok} of {len(rows)} runs ended with a correct kernel."
        )
    policies = [p for p in _policies(bench) if any(r.policy == p for r in rows)]
    main = MAIN_POLICY if MAIN_POLICY in policies else policies[0]
    summ = {p: policy_summary(bench, p)[0] for p in policies}
    g = {p: v for p in policies if (v := summ[p].geomean_speedup) is not None}
    n = len({r.problem for r in rows if r.policy == main})
    suite = SUITE_NAMES.get(bench.suite or "", bench.suite or "")
    problems = f"{n} {suite} problem{'s' if n != 1 else ''}".replace("  ", " ")
    if main not in g:
        return f"{main}: no measured speedup on {problems}."
    out = [f"{main}: {g[main]:.2f}× geomean over the naive starts on {problems}"]
    others = {p: v for p, v in g.items() if p != main}
    band, band_text = spread_band(bench, list(g))
    if others:
        best = max(others, key=lambda p: others[p])
        ratio = g[main] / others[best]
        vs = f"the best baseline ({best}, {others[best]:.2f}×)"
        if ratio >= band:
            out[0] += f", {ratio:.2f}× ahead of {vs}."
        elif ratio <= 1 / band:
            out[0] += f", {1 / ratio:.2f}× behind {vs}."
        elif max(g.values()) / min(g.values()) < band:
            out[0] += f"; no policy is ahead by more than the spread ({band_text})."
        else:
            out[0] += f", within the spread ({band_text}) of {vs}."
    else:
        out[0] += "; no baseline in this bench."
    anytime = {p: v for p in policies if (v := summ[p].anytime_mean) is not None}
    if len(anytime) > 1 and main in anytime:
        lead = max(anytime, key=lambda p: anytime[p])
        if lead != main and anytime[lead] / anytime[main] >= band:
            out.append(
                f"{lead} gains fastest: {anytime[lead]:.2f}× anytime against {main}'s "
                f"{anytime[main]:.2f}×."
            )
        elif lead == main:
            rest = max((v for p, v in anytime.items() if p != main), default=math.nan)
            if anytime[main] / rest >= band:
                out.append(
                    f"{main} gains fastest: {anytime[main]:.2f}× anytime against at most "
                    f"{rest:.2f}×."
                )
    vc = summ[main].geomean_vs_compile
    if vc is not None:
        out.append(f"{main} runs at {vc:.2f}× torch.compile's speed.")
    else:
        reason = policy_reason(bench, main, "vs_compile")
        out.append(f"{reason}." if "torch.compile" in reason else f"vs torch.compile: {reason}.")
    failed = [r for r in rows if r.success is False]
    predicted = sum(1 for r in rows if r.predicted and r.success is not False)
    if failed:
        out.append(f"{len(failed)} of {len(rows)} runs failed (counted as 1.00×).")
    if predicted:
        out.append(f"{predicted} of {len(rows)} results are predicted, not measured.")
    return " ".join(out)


# --------------------------------------------------------------------------- empty cells


def empty_reason(bench: BenchFile, row: BenchRow, field: str) -> str:
    """Why `row[field]` is null: the run failed, nothing was timed, or what this field needs
    and did not have. Fields: speedup, vs_eager, vs_compile, fraction_of_expert, pct_of_floor,
    calls_to_95, gate_calls, seed_spread."""
    if field == "seed_spread":
        return _no_spread(bench, row)
    if row.success is False or row.error:
        return "the run failed: no final kernel to time (its error is in the row)"
    if row.predicted:
        device = bench.device or ""
        return (
            "not measured on the CPU: predicted only"
            if device in ("cpu", "")
            else "not measured: no GPU regime was timed"
        )
    rows = [r for r in bench.rows if not r.predicted and r.success]
    if field == "vs_compile":
        if bench.compile is False:
            return "torch.compile not timed in this bench (--no-compile)"
        if bench.compile is None and not any(
            r.vs_compile is not None for r in rows
        ):  # benches written before bench.json said whether it was asked for
            return "torch.compile not timed in this bench (--no-compile)"
        return "torch.compile of this problem's reference was not timed (it failed to compile)"
    if field == "fraction_of_expert":
        if bench.suite == "heldout":
            return "no expert kernel for held-out problems"
        if row.expert_ms is None:
            return "no expert kernel (expert.py) for this problem"
        return "the expert kernel did not pass the gate, so it was not timed"
    if field == "calls_to_95":
        sp = row.speedup
        if sp is not None and sp <= 1.0:
            return "nothing gained over the start: no 95% mark to reach"
        return "not measured: no gain was timed"
    if field == "speedup":
        regimes = row.regimes
        if regimes and all(v.launch_bound for v in regimes.values()):
            return "every timed regime is launch-bound: no kernel speedup is counted"
        return "no timed regime in common between the start and the final kernel"
    if field == "vs_eager":
        return "the eager reference was not timed"
    if field == "pct_of_floor":
        return "no roofline floor recorded for this problem"
    return f"{field} not recorded in this bench.json"


def _no_spread(bench: BenchFile, row: BenchRow) -> str:
    seeds = bench.seeds
    if seeds is None or seeds < 2:
        return "one seed per run (--seeds 1)"
    from klineage.bench.run import SEEDED_POLICIES

    if row.policy not in SEEDED_POLICIES:
        return f"{row.policy} does not depend on the seed: it runs once"
    return "fewer than two of its seeds finished"


def policy_reason(bench: BenchFile, policy: str, field: str) -> str:
    """Why a policy's summary value for `field` (a row field) is null: the most common reason
    among its rows that lack it."""
    rows = [r for r in bench.rows if r.policy == policy]
    reasons = Counter(
        empty_reason(bench, r, field) for r in rows if row_number(r, field) is None
    ).most_common(1)
    if not reasons:
        return "not in this bench's summary"
    return reasons[0][0]
