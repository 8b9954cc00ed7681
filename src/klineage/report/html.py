"""A bench result (bench.json) as one self-contained HTML page.

Standard library only: the page is built from small functions that each return an HTML
fragment, with every string taken from the data passed through `_e` (html.escape). Charts are
inline SVG; styles are one inline <style>; there is no script, and a Content-Security-Policy
meta tag forbids fetching anything, so the page cannot reach the network even by mistake.

Any numeric field may be null or missing: it renders as "–", with the reason it is empty
(verdict.empty_reason). A row with an "error" shows it. This module holds the page, the summary,
the curves, lineages and skills; problems.py the per-problem sections and the claim's charts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from klineage.errors import LoadError
from klineage.metrics import geomean
from klineage.report.problems import (
    Why,
    predicted_section,
    problems_section,
    roofline_section,
    speedups_section,
)
from klineage.report.values import (
    DASH,
    _cls,
    _e,
    _fmt,
    _is_predicted,
    _num,
    _pct,
    _policies,
    _problems,
    _rows,
    _short_path,
    _td_times,
    _times,
)
from klineage.report.verdict import (
    empty_reason,
    headline,
    policy_reason,
    policy_summary,
    seed_geomeans,
)
from klineage.skills.model import Skill

SCHEMA = 1
# Okabe-Ito (colour-blind safe, yellow left out for contrast); dashes tell lines apart in grey.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
DASHES = ("", "7 3", "2 3", "9 3 2 3")
# The speedup band inside which an effect is shown as neutral (same threshold as the skills'
# "pays off" condition, docs/SKILLS.md).

# --------------------------------------------------------------------------- loading


def load_bench(run: Path) -> dict[str, Any]:
    """The bench result at `run`: a bench.json file, or a directory holding one."""
    path = Path(run)
    if path.is_dir():
        path = path / "bench.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise LoadError(
            str(path), "file not found", expected="a bench.json (klineage bench)"
        ) from e
    except json.JSONDecodeError as e:
        raise LoadError(
            str(path), f"not JSON: {e.msg}", line=e.lineno, column=e.colno, expected="bench.json"
        ) from e
    if not isinstance(data, dict) or not isinstance(data.get("rows", []), list):
        raise LoadError(str(path), "not a bench result", expected="an object with a 'rows' list")
    return data


def write_report(run: Path, out: Path) -> Path:
    """Render the bench result at `run` (file or directory) to the HTML file `out`."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(load_bench(run)), encoding="utf-8")
    return out


# --------------------------------------------------------------------------- values


def _budget(bench: dict[str, Any]) -> int:
    b = _num(bench.get("budget"))
    if b is not None and b >= 1:
        return int(b)
    xs = [x for r in _rows(bench) for x, _ in _curve(r)]
    return max(1, int(max(xs, default=1)))


# --------------------------------------------------------------------------- curves


def _curve(row: dict[str, Any]) -> list[tuple[float, float]]:
    """A row's (gate calls, best speedup so far) points, sorted; malformed points dropped."""
    pts = []
    for p in row.get("curve") or []:
        if isinstance(p, list | tuple) and len(p) == 2:
            x, y = _num(p[0]), _num(p[1])
            if x is not None and y is not None and y > 0:
                pts.append((x, y))
    return sorted(pts)


def _best_at(points: Sequence[tuple[float, float]], k: float) -> float:
    """The step function's value after k gate calls; 1.0 (the naive start) before any point."""
    v = 1.0
    for x, y in points:
        if x > k:
            break
        v = y
    return v


def _anytime(rows: list[dict[str, Any]], budget: int) -> list[float]:
    """Geomean over the rows of the best speedup so far, at 0..budget gate calls."""
    curves = [_curve(r) for r in rows]
    return [geomean(_best_at(c, k) for c in curves) or 1.0 for k in range(budget + 1)]


@dataclass
class _Series:
    name: str
    color: str
    dash: str
    values: list[float]  # at gate calls 0, 1, ..., len - 1


def _style(policies: list[str]) -> dict[str, tuple[str, str]]:
    return {p: (COLORS[i % len(COLORS)], DASHES[i % len(DASHES)]) for i, p in enumerate(policies)}


def _nice_ticks(lo: float, hi: float, n: int) -> list[float]:
    """Round tick values covering [lo, hi] with about n intervals."""
    span = max(hi - lo, 1e-9)
    mag = 10 ** math.floor(math.log10(span / n))
    step = mag
    for m in (1, 2, 2.5, 5, 10):
        step = m * mag
        if span / step <= n:
            break
    start = math.floor(lo / step + 1e-9) * step
    count = math.ceil((hi - start) / step - 1e-9)
    return [start + i * step for i in range(max(count, 1) + 1)]


def _tick_label(t: float, ticks: list[float]) -> str:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    for d in range(5):
        if abs(round(step, d) - step) < 1e-9:
            return f"{t:.{d}f}"
    return f"{t:.4g}"


def _int_step(x_max: int, n: int) -> int:
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if x_max / step <= n:
            return step
    return max(1, x_max // n)


def _svg_chart(series: list[_Series], x_max: int, label: str, *, small: bool = False) -> str:
    """A step-line chart of best-so-far speedups against gate calls, with axes and a legend."""
    if small:
        w, h, ml, mr, mt, mb, font = 250, 150, 38, 8, 8, 24, 10
    else:
        w, h, ml, mr, mt, mb, font = 720, 340, 56, 170, 14, 44, 12
    pw, ph = w - ml - mr, h - mt - mb
    ys = [v for s in series for v in s.values] + [1.0]
    lo, hi = min(ys), max(ys)
    if hi - lo < 1e-6:
        hi = lo + 0.1
    ticks = _nice_ticks(lo, hi, 3 if small else 6)
    y0, y1 = ticks[0], ticks[-1]
    x_max = max(x_max, 1)

    def sx(x: float) -> float:
        return ml + pw * x / x_max

    def sy(y: float) -> float:
        return mt + ph * (1 - (y - y0) / (y1 - y0))

    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" '
        f'width="{w}" height="{h}" role="img" font-size="{font}"><title>{_e(label)}</title>'
    ]
    for t in ticks:  # horizontal grid and y tick labels
        y = sy(t)
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(
            f'<text x="{ml - 5}" y="{y + font / 3:.1f}" text-anchor="end">{_tick_label(t, ticks)}×</text>'
        )
    step = _int_step(x_max, 5 if small else 12)
    for k in range(0, x_max + 1, step):  # x ticks
        x = sx(k)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{mt + ph}" y2="{mt + ph + 4}" class="axis"/>'
        )
        out.append(f'<text x="{x:.1f}" y="{mt + ph + 5 + font}" text-anchor="middle">{k}</text>')
    out.append(f'<line x1="{ml}" x2="{ml}" y1="{mt}" y2="{mt + ph}" class="axis"/>')
    out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{mt + ph}" y2="{mt + ph}" class="axis"/>')
    if y0 <= 1.0 <= y1:  # the naive start
        out.append(
            f'<line x1="{ml}" x2="{ml + pw}" y1="{sy(1.0):.1f}" y2="{sy(1.0):.1f}" class="ref"/>'
        )
    if not small:
        out.append(
            f'<text x="{ml + pw / 2:.1f}" y="{h - 6}" text-anchor="middle">gate calls</text>'
            f'<text transform="translate(14 {mt + ph / 2:.1f}) rotate(-90)" text-anchor="middle">'
            "best speedup so far (geomean)</text>"
        )
    for s in series:
        if not s.values:
            continue
        d = [f"M{sx(0):.1f} {sy(s.values[0]):.1f}"]
        for k in range(1, len(s.values)):
            d.append(f"H{sx(k):.1f}V{sy(s.values[k]):.1f}")
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        out.append(
            f'<path d="{"".join(d)}" fill="none" stroke="{s.color}" stroke-width="{1.5 if small else 2.2}"'
            f"{dash}><title>{_e(s.name)}: {s.values[-1]:.2f}× after {len(s.values) - 1} gate calls"
            "</title></path>"
        )
    if not small:  # legend
        lx = ml + pw + 16
        for i, s in enumerate(series):
            y = mt + 10 + i * 20
            dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
            out.append(
                f'<line x1="{lx}" x2="{lx + 26}" y1="{y}" y2="{y}" stroke="{s.color}" stroke-width="2.2"{dash}/>'
                f'<text x="{lx + 32}" y="{y + 4}">{_e(s.name)} ({s.values[-1]:.2f}×)</text>'
            )
    out.append("</svg>")
    return "".join(out)


def _swatch(color: str, dash: str) -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        '<svg class="swatch" xmlns="http://www.w3.org/2000/svg" width="28" height="10" aria-hidden="true">'
        f'<line x1="1" x2="27" y1="5" y2="5" stroke="{color}" stroke-width="2.2"{d}/></svg>'
    )


# --------------------------------------------------------------------------- sections


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{_e(title)}</h2>\n{body}\n</section>\n'


def _summary(bench: dict[str, Any]) -> str:
    env_raw = bench.get("environment")
    env: dict[str, Any] = env_raw if isinstance(env_raw, dict) else {}
    rows = _rows(bench)
    policies = _policies(bench)
    gpu = env.get("gpu_name")
    cc = env.get("compute_capability")
    facts = [
        ("suite", bench.get("suite")),
        ("device", bench.get("device") or env.get("device")),
        ("GPU", f"{gpu} (compute capability {cc})" if gpu and cc else gpu or "none"),
        ("budget", f"{_fmt(bench.get('budget'), '.0f')} gate calls per problem and policy"),
        ("date", env.get("date") or bench.get("created")),
        ("created", bench.get("created")),
        ("bench id", bench.get("id")),
        ("problems", len(_problems(bench))),
    ]
    out = ['<dl class="facts">']
    out += [f"<dt>{_e(k)}</dt><dd>{_e(v) if v not in (None, '') else DASH}</dd>" for k, v in facts]
    out.append("</dl>")
    if bench.get("schema") not in (None, SCHEMA):
        out.append(
            f'<p class="warn">This file says schema {_e(bench.get("schema"))}; this report reads '
            f"schema {SCHEMA}. Fields it does not know are not shown.</p>"
        )
    predicted = [r for r in rows if _is_predicted(r)]
    if predicted:
        labels = sorted({str(r.get("label")) for r in predicted})
        out.append(
            f'<p class="banner">{len(predicted)} of {len(rows)} results are '
            f"<strong>{_e(' / '.join(labels))}</strong>: no kernel was timed for them "
            f"(device {_e(bench.get('device'))}). Their speedups are predictions, not measurements.</p>"
        )
    head = [
        "policy",
        "problems",
        "success rate",
        "geomean speedup over the naive start",
        "efficiency: mean gate calls to 95% of the final best",
        "anytime: geomean best-so-far speedup, averaged over 1..N candidate calls",
        "geomean vs eager",
        "geomean vs torch.compile",
    ]
    head.append("geomean fraction of expert")
    # The spread across seeds: per seed, the geomean over problems; its range per policy.
    seeded = any(len(seed_geomeans(bench, p)) > 1 for p in policies)
    head += ["geomean per seed: min–max"] if seeded else []
    head.append("results")
    out.append('<table id="summary-table" class="data"><thead><tr>')
    out += [f"<th>{_e(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    computed_any = False
    why = Why("summary")
    for p in policies:
        s, computed = policy_summary(bench, p)
        computed_any |= computed
        labels = sorted(
            {str(r.get("label")) for r in rows if str(r.get("policy")) == p} - {"None", ""}
        )

        def why_td(
            key: str, row_key: str, text: str, times: bool = True, s: Any = s, p: str = p
        ) -> str:
            if _num(s.get(key)) is not None:
                return _td_times(s.get(key)) if times else f'<td class="num">{text}</td>'
            return f'<td class="num na">{why.dash(policy_reason(bench, p, row_key))}</td>'

        cells = [
            f'<th scope="row">{_e(p)}{"*" if computed else ""}</th>',
            f'<td class="num">{_fmt(s.get("problems"), ".0f")}</td>',
            f'<td class="num">{_fmt(_pct(s.get("success_rate")), ".0f", "%")}</td>',
            why_td("geomean_speedup", "speedup", ""),
            why_td(
                "mean_calls_to_95", "calls_to_95", _fmt(s.get("mean_calls_to_95"), ".1f"), False
            ),
            _td_times(s.get("anytime_mean"))
            if _num(s.get("anytime_mean")) is not None
            else f'<td class="num na">{why.dash("no curve: no run gated a candidate")}</td>',
            why_td("geomean_vs_eager", "vs_eager", ""),
            why_td("geomean_vs_compile", "vs_compile", ""),
            why_td(
                "geomean_fraction_of_expert",
                "fraction_of_expert",
                _fmt(s.get("geomean_fraction_of_expert"), ".2f"),
                False,
            ),
        ]
        if seeded:
            g = seed_geomeans(bench, p)
            cells.append(
                f'<td class="num">{min(g):.2f}–{max(g):.2f}×</td>'
                if len(g) > 1
                else f'<td class="num na">{why.dash(empty_reason(bench, {"policy": p}, "seed_spread"))}</td>'
            )
        cells.append(f"<td>{_e(', '.join(labels)) or 'failed'}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    notes = [
        "Speedup is over the naive kernel each problem starts from (1.00× = no gain); vs eager and "
        "vs torch.compile compare the final kernel with PyTorch's own; efficiency counts the gate "
        "calls a policy needed to reach 95% of its final best, over the runs that gained (fewer is "
        "better); anytime averages, over every budget from 1 to N candidate calls, the geomean "
        "speedup a policy had reached by then (higher is better; it counts runs that never gain)."
    ]
    if computed_any:
        notes.append("* no summary in the file for this policy: computed here from its rows.")
    if not seeded:
        notes.append(
            "Spread across seeds: not shown, "
            + empty_reason(bench, {"policy": policies[0] if policies else ""}, "seed_spread")
            + "."
        )
    out += [f'<p class="note">{_e(n)}</p>' for n in notes]
    out.append(why.notes())
    if env:
        out.append('<details><summary>environment</summary><table class="kv">')
        out += [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in env.items()]
        out.append("</table></details>")
    else:
        out.append('<p class="note">No environment was recorded with this run.</p>')
    return _section("summary", "Summary", "\n".join(out))


def _curves(bench: dict[str, Any]) -> str:
    rows = _rows(bench)
    policies = _policies(bench)
    style = _style(policies)
    budget = _budget(bench)
    if not rows:
        return _section("curves", "Anytime curves", '<p class="note">No results.</p>')
    series = []
    for p in policies:
        prs = [r for r in rows if str(r.get("policy")) == p]
        if prs:
            series.append(_Series(p, *style[p], _anytime(prs, budget)))
    out = [
        '<figure class="main-chart">',
        _svg_chart(series, budget, "best speedup so far against gate calls, geomean over problems"),
        "<figcaption>For each policy, the geometric mean over problems of the best speedup found "
        "so far (over the naive start) after each gate call. A run that stopped before the budget "
        "keeps its last best; a run with no curve (a failed run) counts as 1.00×, the naive start, "
        "so every policy is averaged over the same problems.</figcaption></figure>",
        '<h3>Per problem</h3><p class="legend">',
    ]
    out += [
        f'<span class="key">{_swatch(*style[p])} {_e(p)}</span>' for p in policies if p in style
    ]
    out.append('</p><div class="multiples">')
    for prob in _problems(bench):
        prs = [r for r in rows if str(r.get("problem")) == prob]
        sub = [
            _Series(
                str(r.get("policy")),
                *style[str(r.get("policy"))],
                [_best_at(c, k) for k in range(budget + 1)],
            )
            for r in prs
            if (c := _curve(r))
        ]
        missing = [str(r.get("policy")) for r in prs if not _curve(r)]
        note = f'<div class="note">no curve: {_e(", ".join(missing))}</div>' if missing else ""
        out.append(
            f'<figure class="small"><figcaption title="{_e(prob)}">{_e(prob)}</figcaption>'
            f"{_svg_chart(sub, budget, prob, small=True)}{note}</figure>"
        )
    out.append("</div>")
    return _section("curves", "Anytime curves", "\n".join(out))


def _applied(items: object) -> str:
    if not isinstance(items, list) or not items:
        return '<span class="muted">nothing kept</span>'
    lis = []
    for a in items:
        if isinstance(a, dict):
            extra = ", ".join(
                x
                for x in (
                    _e(a.get("materializer") or ""),
                    _times(a.get("speedup")) if _num(a.get("speedup")) is not None else "",
                )
                if x
            )
            lis.append(
                f"<li>{_e(a.get('label'))}"
                + (f' <span class="muted">({extra})</span>' if extra else "")
                + "</li>"
            )
        else:
            lis.append(f"<li>{_e(a)}</li>")
    return '<ul class="applied">' + "".join(lis) + "</ul>"


# --------------------------------------------------------------------------- skills


def _skills(bench: dict[str, Any]) -> tuple[list[Skill], list[str]]:
    """The bench's skills as records; those that do not validate become notes."""
    skills, bad = [], []
    given = bench.get("skills")
    for i, raw in enumerate(given if isinstance(given, list) else []):
        try:
            skills.append(Skill.model_validate(raw))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            bad.append(f"skill {i}: {where}: {first['msg']}")
    return skills, bad


def _effects_html(skill: Skill, lineage_id: str, step: int) -> str:
    effs = [e for e in skill.effects if e.lineage_id == lineage_id and e.step == step]
    if not effs:
        return '<div class="eff muted">no effect recorded</div>'
    out = []
    for e in effs:
        if e.measured and e.speedup is not None:
            val = f'<span class="{_cls(e.speedup)}">{_times(e.speedup)}</span>'
        else:
            val = '<span class="muted">not measured</span>'
        out.append(f'<div class="eff">{_e(e.regime)}: {val}</div>')
    return "".join(out)


def _lineages(skills: list[Skill]) -> str:
    by: dict[str, list[tuple[int, Skill]]] = {}
    meta: dict[str, Any] = {}
    for s in skills:
        for p in s.provenance:
            by.setdefault(p.lineage_id, []).append((p.step, s))
            meta.setdefault(p.lineage_id, p)
    if not by:
        return _section("lineages", "Lineages", '<p class="note">No skills with provenance.</p>')
    out = [
        '<p class="note">Each lineage walks an expert kernel backward: every arrow removes one '
        "optimization (the skill named on the step) and the gate accepted the simpler kernel. "
        "The numbers are that optimization's effect per regime: how much slower the kernel got "
        "without it, so above 1.00× it helped, below 1.00× it hurt. Only steps that became skills "
        "in this report are shown by name.</p>"
    ]
    for lid in sorted(by, key=lambda x: (str(meta[x].source_kernel), x)):
        p = meta[lid]
        steps = sorted(by[lid], key=lambda t: (t[0], t[1].name))
        out.append(
            f'<div class="lineage"><h3 title="{_e(p.source_kernel)}">{_e(_short_path(p.source_kernel))}'
            f' <span class="muted">lineage {_e(lid[:12])} · {_e(p.device)} · {_e(p.date)}</span></h3>'
            '<div class="chain"><div class="node end">expert</div>'
        )
        expected = 1
        for step, s in steps:
            if step > expected:
                gap = f"step {expected}" if step - 1 == expected else f"steps {expected}–{step - 1}"
                out.append(
                    f'<span class="arrow">→</span><div class="node gap">{gap}<div class="muted">'
                    "not among this report's skills</div></div>"
                )
            expected = max(expected, step + 1)
            out.append(
                f'<span class="arrow">→</span><div class="node"><div class="stepno">step {step}</div>'
                f'<div class="skill" title="{_e(s.intent)}">− {_e(s.name)}</div>'
                f"{_effects_html(s, lid, step)}</div>"
            )
        out.append('<span class="arrow">→</span><div class="node end">simplest</div></div></div>')
    return _section("lineages", "Lineages", "\n".join(out))


def _skill_card(s: Skill) -> str:
    kernels = sorted({_short_path(p.source_kernel) for p in s.provenance})
    out = [
        f'<details class="card" id="skill-{_e(s.id)}"><summary><strong>{_e(s.name)}</strong> '
        f'<code>{_e(s.id)}</code> <span class="muted">{_e(s.category)} · seen in '
        f"{len(kernels)} source kernel{'s' if len(kernels) != 1 else ''}</span></summary>",
        f"<p>{_e(s.intent)}</p>",
        '<dl class="facts">',
        f"<dt>anchor</dt><dd>{_e(s.anchor)}</dd>",
        f"<dt>rewrite</dt><dd><code>{_e(s.rewrite.pass_name)}</code> "
        f"<code>{_e(json.dumps(s.rewrite.params, default=str)[:300])}</code></dd>",
        f"<dt>source kernels</dt><dd>{_e(', '.join(kernels)) or DASH}</dd>",
        "</dl>",
        "<h4>Conditions</h4>",
    ]
    if s.conditions:
        out.append(
            '<table class="data"><thead><tr><th>kind</th><th>holds when</th><th>evidence</th></tr></thead><tbody>'
        )
        out += [
            f"<tr><td>{_e(c.kind)}</td><td>{_e(c.predicate)}</td><td>{_e(c.evidence)}</td></tr>"
            for c in s.conditions
        ]
        out.append("</tbody></table>")
    else:
        out.append('<p class="muted">none recorded</p>')
    out.append("<h4>Effects</h4>")
    if s.effects:
        out.append(
            '<table class="data"><thead><tr><th>regime</th><th>dtype</th><th>GPU</th>'
            "<th>without (ms)</th><th>with (ms)</th><th>speedup</th><th>lineage, step</th>"
            "</tr></thead><tbody>"
        )
        for e in s.effects:
            gpu = f"{e.gpu} ({e.arch})" if e.gpu and e.arch else e.gpu
            sp = _td_times(e.speedup) if e.measured else '<td class="muted">not measured</td>'
            where = f"{(e.lineage_id or '')[:8]} step {e.step}" if e.lineage_id else DASH
            out.append(
                f"<tr><td>{_e(e.regime)}</td><td>{_e(e.dtype) or DASH}</td><td>{_e(gpu) or DASH}</td>"
                f'<td class="num">{_fmt(e.base_ms, ".4g")}</td><td class="num">{_fmt(e.new_ms, ".4g")}</td>'
                f"{sp}<td>{_e(where)}</td></tr>"
            )
        out.append("</tbody></table>")
    else:
        out.append('<p class="muted">none recorded</p>')
    out.append("<h4>Failures it avoids</h4>")
    if s.failures_avoided:
        out.append("<ul>")
        for f in s.failures_avoided:
            first = f.message.splitlines()[0][:300] if f.message else ""
            out.append(
                f"<li><code>{_e(f.attempt)}</code> rejected at {_e(f.stage) or DASH}: {_e(first)} "
                f'<span class="muted">({_e(f.violated_assumption)})</span>'
                f"<details><summary>full message</summary><pre>{_e(f.message)}</pre></details></li>"
            )
        out.append("</ul>")
    else:
        out.append('<p class="muted">none recorded</p>')
    out.append("<h4>Exemplar (the expert's code, without → with)</h4>")
    out.append(f'<pre class="diff">{_diff_html(s.exemplar.diff)}</pre>')
    out.append("<h4>Provenance</h4><ul>")
    out += [
        f'<li title="{_e(p.source_kernel)}">{_e(_short_path(p.source_kernel))}, lineage '
        f"{_e(p.lineage_id[:12])} step {p.step}, {_e(p.device)}, {_e(p.date)}</li>"
        for p in s.provenance
    ]
    out.append("</ul></details>")
    return "\n".join(out)


def _diff_html(diff: str) -> str:
    lines = []
    for line in diff.rstrip("\n").splitlines():
        cls = (
            "hunk"
            if line.startswith("@@")
            else "meta"
            if line.startswith(("---", "+++"))
            else ("add" if line.startswith("+") else "del" if line.startswith("-") else "")
        )
        lines.append(f'<span class="{cls}">{_e(line)}</span>' if cls else _e(line))
    return "\n".join(lines)


def _skills_section(skills: list[Skill], bad: list[str]) -> str:
    out = []
    if not skills:
        out.append('<p class="note">No skills in this bench result.</p>')
    out += [_skill_card(s) for s in skills]
    out += [f'<p class="warn">Not shown, does not match the skill schema: {_e(b)}</p>' for b in bad]
    return _section("skills", f"Skills ({len(skills)})", "\n".join(out))


# --------------------------------------------------------------------------- page

CSS = """
:root { --fg:#1b1f24; --muted:#6a737d; --line:#d0d7de; --bg:#fff; --alt:#f6f8fa;
        --up:#1a7f37; --down:#cf222e; --warn:#fff8c5; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; padding: 0 24px 48px; max-width: 1400px; }
header { border-bottom: 1px solid var(--line); padding: 16px 0 8px; }
h1 { margin: 0 0 4px; font-size: 22px; }
h2 { border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 36px; }
h3 { font-size: 15px; margin: 18px 0 6px; } h4 { margin: 14px 0 4px; }
nav a { margin-right: 14px; }
code, pre { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--alt); padding: 8px; overflow-x: auto; border: 1px solid var(--line); }
table.data { border-collapse: collapse; margin: 8px 0; }
table.data th, table.data td { border: 1px solid var(--line); padding: 3px 7px; vertical-align: top; text-align: left; }
table.data thead th { background: var(--alt); font-weight: 600; }
table.kv th { text-align: left; padding-right: 12px; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.up { color: var(--up); font-weight: 600; } .down { color: var(--down); font-weight: 600; }
.muted, .na { color: var(--muted); } .ok { color: var(--up); } .bad { color: var(--down); }
tr.failed td { background: #fff5f5; }
.error { color: var(--down); white-space: pre-wrap; font-family: ui-monospace, monospace; font-size: 12px; }
td.stop { max-width: 360px; white-space: pre-wrap; }
ul.applied { margin: 0; padding-left: 16px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 8px 0; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
.banner { background: var(--warn); border: 1px solid #d4a72c; padding: 8px 12px; font-size: 15px; }
.warn { background: var(--warn); padding: 4px 8px; } .note { color: var(--muted); max-width: 900px; }
figure { margin: 8px 0; } figcaption { color: var(--muted); max-width: 900px; }
svg.chart text { fill: var(--fg); } svg.chart .grid { stroke: #eaeef2; }
svg.chart .axis { stroke: var(--fg); } svg.chart .ref { stroke: var(--muted); stroke-dasharray: 4 4; }
.multiples { display: flex; flex-wrap: wrap; gap: 12px; }
figure.small { width: 250px; } figure.small figcaption { color: var(--fg); font-size: 12px;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.legend .key { margin-right: 14px; white-space: nowrap; } svg.swatch { vertical-align: middle; }
.lineage { margin-bottom: 18px; }
.chain { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 4px; }
.node { border: 1px solid var(--line); border-radius: 6px; padding: 4px 8px; background: var(--alt);
        font-size: 12px; min-width: 90px; }
.node.end { background: #ddf4ff; font-weight: 600; min-width: 0; }
.node.gap { border-style: dashed; background: var(--bg); color: var(--muted); }
.node .stepno { color: var(--muted); font-size: 11px; } .node .skill { font-weight: 600; }
.arrow { color: var(--muted); font-size: 16px; }
details.card { border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px; margin: 6px 0; }
details.card > summary { cursor: pointer; }
pre.diff .add { color: var(--up); } pre.diff .del { color: var(--down); }
pre.diff .hunk { color: #8250df; } pre.diff .meta { color: var(--muted); }
.verdict { font-size: 17px; font-weight: 600; max-width: 1000px; margin: 6px 0 10px; }
.why { cursor: help; } .why sup { font-size: 9px; margin-left: 1px; } .why sup a { color: var(--muted); }
ol.why { color: var(--muted); font-size: 13px; } .range { color: var(--muted); font-size: 11px; }
svg.chart .band { fill: #f6f8fa; }
details.problem { border-bottom: 1px solid var(--line); padding: 4px 0; }
details.problem > summary { cursor: pointer; } details.problem table { margin-left: 16px; }
"""


def render_report(bench: dict[str, Any]) -> str:
    """The whole page for a bench result (the dict in bench.json)."""
    skills, bad = _skills(bench)
    style = _style(_policies(bench))
    title = f"klineage bench {bench.get('suite') or ''} {bench.get('id') or ''}".strip()
    nav = "".join(
        f'<a href="#{sid}">{name}</a>'
        for sid, name in (
            ("summary", "Summary"),
            ("curves", "Anytime curves"),
            ("speedups", "Final speedups"),
            ("predicted", "Predicted vs measured"),
            ("roofline", "Roofline"),
            ("problems", "Problems"),
            ("lineages", "Lineages"),
            ("skills", "Skills"),
        )
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # Nothing may be fetched: no scripts, images, fonts or style sheets from anywhere.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<header><h1>{_e(title)}</h1>"
        f'<p id="verdict" class="verdict">{_e(headline(bench))}</p><nav>{nav}</nav></header>',
        "<main>",
        _summary(bench),
        _curves(bench),
        speedups_section(bench, style),
        predicted_section(bench, style),
        roofline_section(bench, style),
        problems_section(bench, _applied),
        _lineages(skills),
        _skills_section(skills, bad),
        "</main>",
        f'<footer class="note">Generated by klineage report from bench {_e(bench.get("id"))} '
        f"(schema {_e(bench.get('schema'))}).</footer>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
