"""The per-problem sections of the report: final speedup per problem by policy, predicted
against measured effects, % of the roofline floor, and the problems themselves as folds (one
<details> per problem, its policies' rows inside). Every empty cell carries its reason as a
tooltip and a numbered note (`Why`), so no "–" is left unexplained.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from statistics import median

from klineage.bench.records import AppliedStep, BenchFile, BenchRow
from klineage.metrics import PAYS_OFF, geomean
from klineage.report.charts import Dots, Pair, dot_plot, scatter
from klineage.report.values import (
    DASH,
    _cls,
    _e,
    _fmt,
    _policies,
    _problems,
    _section,
    _times,
    row_number,
)
from klineage.report.verdict import empty_reason, seed_spread


class Why:
    """Numbered reasons for the empty cells of one section: the same reason gets one number."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.reasons: list[str] = []

    def dash(self, reason: str) -> str:
        """A "–" that says why: the reason as its tooltip and a footnote number."""
        if reason not in self.reasons:
            self.reasons.append(reason)
        n = self.reasons.index(reason) + 1
        return (
            f'<span class="why" title="{_e(reason)}">{DASH}<sup><a href="#why-{self.prefix}-{n}">'
            f"{n}</a></sup></span>"
        )

    def notes(self) -> str:
        if not self.reasons:
            return ""
        lis = "".join(
            f'<li id="why-{self.prefix}-{i}">{_e(r)}</li>' for i, r in enumerate(self.reasons, 1)
        )
        return f'<ol class="why">{lis}</ol>'


def cell(why: Why, bench: BenchFile, row: BenchRow, key: str, text: str) -> str:
    """A table cell for row[key] shown as `text`, or the reason it is empty."""
    if row_number(row, key) is None:
        return f'<td class="num na">{why.dash(empty_reason(bench, row, key))}</td>'
    cls = f" {_cls(row_number(row, key))}" if text.endswith("×") else ""
    return f'<td class="num{cls}">{text}</td>'


def _by(bench: BenchFile) -> dict[tuple[str, str], list[BenchRow]]:
    out: dict[tuple[str, str], list[BenchRow]] = {}
    for r in bench.rows:
        out.setdefault((r.problem, r.policy), []).append(r)
    return out


def _final(rows: list[BenchRow]) -> tuple[float, float, float] | None:
    """(geomean over seeds, min, max) of the final speedup; None when none was measured."""
    timed = [v for r in rows if (v := r.speedup) is not None and not r.predicted]
    if not timed:
        return None
    # A failed seed counts 1.0x, as in the bench's geomeans: failing is not free.
    vals = timed + [1.0 for r in rows if r.success is False]
    spread = seed_spread(rows)
    g = geomean(vals) or 1.0
    lo, hi = spread if spread else (g, g)
    return g, lo, hi


def _short(problem: str) -> str:
    return problem.split("/", 1)[1] if "/" in problem else problem


def _slug(problem: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", problem).strip("-") or "problem"


# --------------------------------------------------------------------------- charts


def speedups_section(bench: BenchFile, style: dict[str, tuple[str, str]]) -> str:
    by = _by(bench)
    probs, pols = _problems(bench), _policies(bench)
    series = [
        Dots(p, style[p][0], {_short(q): f for q in probs if (f := _final(by.get((q, p), [])))})
        for p in pols
    ]
    chart = dot_plot(
        [_short(q) for q in probs],
        series,
        title="final speedup over the naive start, per problem and policy",
        axis="final speedup over the naive start (log scale)",
    )
    if not chart:
        rows = bench.rows
        if not rows:
            reason = "No results in this bench."
        elif any(r.predicted and r.success is not False for r in rows):
            reason = (
                "No measured speedup in this bench: every result is predicted, not measured "
                f"(device {bench.device}), so there is nothing to plot."
            )
        else:
            reason = "No measured speedup in this bench: every run failed."
        return _section(
            "speedups", "Final speedup per problem", f'<p class="note">{_e(reason)}</p>'
        )
    failed = sorted(
        f"{_short(q)} ({p})" for (q, p), rs in by.items() if all(r.success is False for r in rs)
    )
    cap = (
        "Each dot is a policy's final speedup on one problem (over the naive kernel it started "
        "from; right of the dashed line is faster). With several seeds the dot is their geomean "
        "and the whisker their range."
    )
    if failed:
        cap += f" Not drawn, the run failed: {', '.join(failed)}."
    body = f"<figure>{chart}<figcaption>{_e(cap)}</figcaption></figure>"
    return _section("speedups", "Final speedup per problem", body)


def prediction_pairs(bench: BenchFile, style: dict[str, tuple[str, str]]) -> list[Pair]:
    """The kept trials that carry both the skill's predicted speedup and a measured one."""
    out = []
    for r in bench.rows:
        if r.predicted:
            continue
        color = style.get(r.policy, ("#000000", ""))[0]
        for a in r.applied:
            pr, me = a.predicted, a.speedup
            if pr is not None and me is not None and pr > 0 and me > 0:
                skill = (a.label or "?").split(" (")[0].split(" [")[0]
                label = f"{skill} on {_short(r.problem)} ({r.policy})"
                out.append(Pair(pr, me, label, color, skill))
    return out


def predicted_section(bench: BenchFile, style: dict[str, tuple[str, str]]) -> str:
    pairs = prediction_pairs(bench, style)
    title = "Predicted against measured"
    if not pairs:
        rows = bench.rows
        if rows and all(r.predicted for r in rows):
            why = (
                "No pairs: nothing was timed (predicted, not measured), so no prediction can be "
                "checked against a measurement."
            )
        elif not any(a.predicted is not None for r in rows for a in r.applied):
            why = (
                "No pairs: no kept trial carries a skill's predicted speedup (the policies here "
                "do not retrieve skills, or no skill's conditions matched)."
            )
        else:
            why = "No pairs: no kept trial has both a predicted and a measured speedup."
        return _section("predicted", title, f'<p class="note">{_e(why)}</p>')
    agree = sum(1 for p in pairs if (p.predicted >= PAYS_OFF) == (p.measured >= PAYS_OFF))
    within = sum(1 for p in pairs if max(p.measured / p.predicted, p.predicted / p.measured) < 1.25)
    over = sum(1 for p in pairs if p.predicted >= PAYS_OFF > p.measured)
    stats = (
        f"{len(pairs)} kept trials with a prediction: the prediction and the measurement agree on "
        f"whether the step pays off (≥ {PAYS_OFF:.2f}×) in {agree}; the measurement is within "
        f"25% of the prediction in {within}; a gain was predicted and not measured in {over}."
    )
    cap = (
        "Each dot is one kept optimization step: x, the speedup its skill predicted from the "
        "skill's measured effects; y, the speedup the gate measured for the step. On the dashed "
        "line the prediction was exact; above it the step did better than predicted. Only kept "
        "steps are in bench.json (rejected trials' predictions are in the run database), so "
        "steps predicted to gain and then rejected are not shown."
    )
    legend = "".join(
        f'<span class="key"><svg class="swatch" xmlns="http://www.w3.org/2000/svg" width="10" '
        f'height="10" aria-hidden="true"><circle cx="5" cy="5" r="4" fill="{c}"/></svg> {_e(p)}</span>'
        for p, (c, _) in style.items()
        if any(pair.color == c for pair in pairs)
    )
    body = (
        f"<figure>{scatter(pairs, title='predicted against measured speedup')}"
        f'<figcaption><p class="legend">{legend}</p><p>{_e(stats)}</p><p>{_e(cap)}</p>'
        "</figcaption></figure>"
        f"{_per_skill(pairs)}"
    )
    return _section("predicted", title, body)


def _per_skill(pairs: list[Pair]) -> str:
    """Per skill: how many kept steps, median predicted and measured, and their geomean ratio."""
    by: dict[str, list[Pair]] = {}
    for p in pairs:
        by.setdefault(p.skill, []).append(p)
    out = [
        '<table id="predicted-table" class="data"><thead><tr><th>skill</th><th>kept steps</th>'
        "<th>predicted (median)</th><th>measured (median)</th>"
        "<th>measured ÷ predicted (geomean)</th></tr></thead><tbody>"
    ]
    for skill in sorted(by, key=lambda k: (-len(by[k]), k)):
        ps = by[skill]
        ratio = geomean(p.measured / p.predicted for p in ps)
        out.append(
            f'<tr><td>{_e(skill)}</td><td class="num">{len(ps)}</td>'
            f'<td class="num">{_times(median(p.predicted for p in ps))}</td>'
            f'<td class="num">{_times(median(p.measured for p in ps))}</td>'
            f'<td class="num">{_fmt(ratio, ".2f")}</td></tr>'
        )
    out.append("</tbody></table>")
    return "".join(out)


def roofline_section(bench: BenchFile, style: dict[str, tuple[str, str]]) -> str:
    by = _by(bench)
    probs, pols = _problems(bench), _policies(bench)
    series = []
    for p in pols:
        pts = {}
        for q in probs:
            vals = [
                v
                for r in by.get((q, p), [])
                if (v := r.pct_of_floor) is not None and not r.predicted
            ]
            if vals:
                pts[_short(q)] = (sum(vals) / len(vals), min(vals), max(vals))
        series.append(Dots(p, style[p][0], pts))
    chart = dot_plot(
        [_short(q) for q in probs],
        series,
        title="% of the roofline floor reached by the final kernel",
        axis="% of the roofline floor (floor time / kernel time; 100% = at the floor)",
        log=False,
        unit="%",
        ref=None,
    )
    if not chart:
        reasons = sorted(
            {empty_reason(bench, r, "pct_of_floor") for r in bench.rows} or {"no results"}
        )
        body = '<p class="note">No % of roofline in this bench: ' + _e("; ".join(reasons)) + ".</p>"
        return _section("roofline", "% of roofline", body)
    cap = (
        "How close each final kernel came to its roofline floor: the time the problem's bytes "
        "and FLOPs need at the GPU's bandwidth and throughput, over the kernel's time (geomean "
        "over the timed regimes). Low means room is left; the speedup chart says how much was "
        "gained, this one how much is left."
    )
    return _section(
        "roofline", "% of roofline", f"<figure>{chart}<figcaption>{_e(cap)}</figcaption></figure>"
    )


# --------------------------------------------------------------------------- problems


def problems_section(bench: BenchFile, applied: Callable[[list[AppliedStep]], str]) -> str:
    """A problem × policy table of final speedups, then one fold per problem with every
    column; `applied` renders a row's applied list (from the page module)."""
    by = _by(bench)
    probs, pols = _problems(bench), _policies(bench)
    why = Why("problems")
    several = any(seed_spread(rs) for rs in by.values())
    out = [
        '<p class="note">Final speedup over the naive start; open a problem for every column. '
        + ("With several seeds: geomean, and the range across seeds below it. " if several else "")
        + "A “–” says why it is empty: hover it, or read the numbered notes at the end.</p>",
        '<table id="problems-table" class="data"><thead><tr><th>problem</th>',
    ]
    out += [f"<th>{_e(p)}</th>" for p in pols]
    out.append("<th>% of roofline (fastest)</th></tr></thead><tbody>")
    for q in probs:
        cells = [f'<th scope="row"><a href="#problem-{_slug(q)}">{_e(_short(q))}</a></th>']
        best: tuple[float, BenchRow] | None = None
        for p in pols:
            rs = by.get((q, p), [])
            f = _final(rs)
            if not rs:
                cells.append(
                    f'<td class="num na">{why.dash(f"{p} did not run on this problem")}</td>'
                )
                continue
            if f is None:
                cells.append(
                    f'<td class="num na">{why.dash(empty_reason(bench, rs[0], "speedup"))}</td>'
                )
                continue
            rng = f'<div class="range">{f[1]:.2f}–{f[2]:.2f}</div>' if f[2] > f[1] else ""
            cells.append(f'<td class="num {_cls(f[0])}">{_times(f[0])}{rng}</td>')
            for r in rs:
                if r.speedup is not None and (best is None or r.speedup > best[0]):
                    best = (r.speedup, r)
        if best is not None and best[1].pct_of_floor is not None:
            cells.append(f'<td class="num">{_fmt(best[1].pct_of_floor, ".1f", "%")}</td>')
        else:
            nothing = BenchRow()
            any_row = best[1] if best else by.get((q, pols[0]), [nothing])[0] if pols else nothing
            cells.append(
                f'<td class="num na">{why.dash(empty_reason(bench, any_row, "pct_of_floor"))}</td>'
            )
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    out.append("<h3>Per problem</h3>")
    hidden = empty_columns(bench)
    if hidden:
        names = {key: h for h, key in HEAD if key}
        out.append(
            '<p class="note">Left out below, empty for every run: '
            + "; ".join(f"<strong>{_e(names[k])}</strong> ({_e(v)})" for k, v in hidden.items())
            + ".</p>"
        )
    for q in probs:
        rs = [r for p in pols for r in by.get((q, p), [])]
        out.append(_problem_fold(bench, q, rs, why, applied, hidden))
    out.append(
        "<h4>Why a cell is empty</h4>" + (why.notes() or '<p class="note">No empty cells.</p>')
    )
    return _section("problems", "Problems × policies", "\n".join(out))


HEAD = (
    ("policy", ""),
    ("success", ""),
    ("result", ""),
    ("speedup", ""),
    ("seeds: min–max", "seed_spread"),
    ("vs eager", "vs_eager"),
    ("vs compile", "vs_compile"),
    ("fraction of expert", "fraction_of_expert"),
    ("% of roofline floor", "pct_of_floor"),
    ("gate calls", ""),
    ("calls to 95%", ""),
    ("applied", ""),
    ("stop reason", ""),
)
# Columns left out of the folds when no run has them, with the reason said once above.
OPTIONAL = ("seed_spread", "vs_eager", "vs_compile", "fraction_of_expert", "pct_of_floor")


def empty_columns(bench: BenchFile) -> dict[str, str]:
    """The optional columns no run has a value for, each with its most common reason."""
    rows = bench.rows
    by = _by(bench)
    out = {}
    for key in OPTIONAL:
        if key == "seed_spread":
            has = any(seed_spread(rs) for rs in by.values())
        else:
            has = any(row_number(r, key) is not None for r in rows)
        if not has and rows:
            reasons = Counter(empty_reason(bench, r, key) for r in rows)
            out[key] = reasons.most_common(1)[0][0]
    return out


def _problem_fold(
    bench: BenchFile,
    problem: str,
    rows: list[BenchRow],
    why: Why,
    applied: Callable[[list[AppliedStep]], str],
    hidden: dict[str, str],
) -> str:
    measured = [(v, r) for r in rows if (v := r.speedup) is not None]
    failed = [r for r in rows if r.success is False or r.error]
    if measured:
        v, r = max(measured, key=lambda t: t[0])
        gist = (
            f"best {_times(v)} ({_e(r.policy)})"
            if v >= PAYS_OFF
            else f"no policy gained {PAYS_OFF:.2f}× or more (best {_times(v)})"
        )
    else:
        gist = "no measured speedup"
    if failed:
        gist += f' · <span class="bad">{len(failed)} failed</span>'
    out = [
        f'<details class="problem" id="problem-{_slug(problem)}"><summary><strong>'
        f'{_e(problem)}</strong> <span class="muted">{gist}</span></summary>',
        '<table class="data"><thead><tr>'
        + "".join(f"<th>{_e(h)}</th>" for h, key in HEAD if key not in hidden)
        + "</tr></thead><tbody>",
    ]
    several = (bench.seeds or 1) > 1
    same: dict[str, list[BenchRow]] = {}
    for r in rows:
        same.setdefault(r.policy, []).append(r)
    for r in rows:
        ok = r.success
        mark = DASH if ok is None else ("✓" if ok else "✗")
        stop = _e(r.stop_reason) or ("" if r.error else "not recorded")
        if r.error:
            stop += f'<div class="error">error: {_e(r.error)}</div>'
        seed = f" (seed {_e(r.seed)})" if several and r.seed is not None else ""
        gate_calls = (
            f'<td class="num">{_fmt(r.gate_calls, ".0f")}</td>'
            if r.gate_calls is not None
            else f'<td class="num na">{why.dash(empty_reason(bench, r, "gate_calls"))}</td>'
        )
        optional = {
            "seed_spread": lambda r=r: _spread_td(why, bench, r, same[r.policy]),
            "vs_eager": lambda r=r: cell(why, bench, r, "vs_eager", _times(r.vs_eager)),
            "vs_compile": lambda r=r: cell(why, bench, r, "vs_compile", _times(r.vs_compile)),
            "fraction_of_expert": lambda r=r: cell(
                why, bench, r, "fraction_of_expert", _fmt(r.fraction_of_expert, ".2f")
            ),
            "pct_of_floor": lambda r=r: cell(
                why, bench, r, "pct_of_floor", _fmt(r.pct_of_floor, ".1f", "%")
            ),
        }  # called only for the columns shown, so a hidden column adds no note
        cells = [
            f"<td>{_e(r.policy)}{seed}</td>",
            f'<td class="{"ok" if ok else "bad" if ok is not None else "na"}">{mark}</td>',
            f"<td>{_e(r.label) or ('failed' if ok is False else 'not recorded')}</td>",
            cell(why, bench, r, "speedup", _times(r.speedup)),
            *(optional[k]() for k in OPTIONAL if k not in hidden),
            gate_calls,
            cell(why, bench, r, "calls_to_95", _fmt(r.calls_to_95, ".0f")),
            f"<td>{applied(r.applied)}</td>",
            f'<td class="stop">{stop}</td>',
        ]
        cls = ' class="failed"' if ok is False or r.error else ""
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></details>")
    return "\n".join(out)


def _spread_td(why: Why, bench: BenchFile, r: BenchRow, same: list[BenchRow]) -> str:
    spread = seed_spread(same)
    if spread:
        return f'<td class="num">{spread[0]:.2f}–{spread[1]:.2f}×</td>'
    return f'<td class="num na">{why.dash(empty_reason(bench, r, "seed_spread"))}</td>'
