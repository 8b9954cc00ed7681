"""The anytime curves: each row's best speedup so far against gate calls (a step function of
its curve points), their geomean over problems per policy, and the section that draws them (one
chart for the claim, small multiples per problem). Both are klineage.metrics' (best_after,
anytime), drawn over 0..budget gate calls."""

from __future__ import annotations

from klineage.bench.records import BenchFile
from klineage.metrics import anytime, best_after
from klineage.report.charts import StepSeries, step_chart, swatch
from klineage.report.style import policy_style
from klineage.report.values import _e, _policies, _problems, _section


def _budget(bench: BenchFile) -> int:
    """The x axis: the bench's budget, else (older or partial files) its longest curve."""
    if bench.budget is not None and bench.budget >= 1:
        return bench.budget
    return max(1, max((x for r in bench.rows for x, _ in r.curve), default=1))


def curves_section(bench: BenchFile) -> str:
    rows = bench.rows
    policies = _policies(bench)
    style = policy_style(policies)
    budget = _budget(bench)
    if not rows:
        return _section("curves", "Anytime curves", '<p class="note">No results.</p>')
    series = []
    for p in policies:
        prs = [r for r in rows if r.policy == p]
        if prs:
            series.append(
                StepSeries(p, *style[p], anytime([r.curve for r in prs], range(budget + 1)))
            )
    out = [
        '<figure class="main-chart">',
        step_chart(series, budget, "best speedup so far against gate calls, geomean over problems"),
        "<figcaption>For each policy, the geometric mean over problems of the best speedup found "
        "so far (over the naive start) after each gate call. A run that stopped before the budget "
        "keeps its last best; a run with no curve (a failed run) counts as 1.00×, the naive start, "
        "so every policy is averaged over the same problems.</figcaption></figure>",
        '<h3>Per problem</h3><p class="legend">',
    ]
    out += [f'<span class="key">{swatch(*style[p])} {_e(p)}</span>' for p in policies if p in style]
    out.append('</p><div class="multiples">')
    for prob in _problems(bench):
        prs = [r for r in rows if r.problem == prob]
        sub = [
            StepSeries(
                r.policy, *style[r.policy], [best_after(r.curve, k) for k in range(budget + 1)]
            )
            for r in prs
            if r.curve
        ]
        missing = [r.policy for r in prs if not r.curve]
        note = f'<div class="note">no curve: {_e(", ".join(missing))}</div>' if missing else ""
        out.append(
            f'<figure class="small"><figcaption title="{_e(prob)}">{_e(prob)}</figcaption>'
            f"{step_chart(sub, budget, prob, small=True)}{note}</figure>"
        )
    out.append("</div>")
    return _section("curves", "Anytime curves", "\n".join(out))
