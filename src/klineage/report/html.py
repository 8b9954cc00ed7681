"""A bench result (bench.json) as one self-contained HTML page.

Standard library only: the page is built from small functions that each return an HTML
fragment, with every string taken from the data passed through `_e` (html.escape). Charts are
inline SVG; styles are one inline <style>; there is no script, and a Content-Security-Policy
meta tag forbids fetching anything, so the page cannot reach the network even by mistake.

bench.json is read through bench/records.py (BenchFile, BenchRow: lenient, so every file the
bench ever wrote loads). Any numeric field may be null or missing: it renders as "–", with the
reason it is empty (verdict.empty_reason). A row with an "error" shows it. This module holds the page and the
summary; curves.py the anytime curves, problems.py the per-problem sections, cards.py the
lineages and skills, charts.py the SVG, style.py the style sheet and each policy's colours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from klineage.bench.records import SCHEMA, AppliedStep, BenchFile, BenchRow
from klineage.errors import LoadError
from klineage.report.cards import bench_skills, lineages_section, skills_section
from klineage.report.curves import curves_section
from klineage.report.problems import (
    Why,
    predicted_section,
    problems_section,
    roofline_section,
    speedups_section,
)
from klineage.report.style import CSS, policy_style
from klineage.report.values import (
    DASH,
    _e,
    _fmt,
    _pct,
    _policies,
    _problems,
    _section,
    _td_times,
    _times,
    as_bench,
)
from klineage.report.verdict import (
    empty_reason,
    headline,
    policy_reason,
    policy_summary,
    seed_geomeans,
)

# --------------------------------------------------------------------------- loading


def load_bench(run: Path) -> BenchFile:
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
    try:
        return BenchFile.model_validate(data)
    except ValidationError as e:  # the models take nearly anything; what is left is named
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise LoadError(str(path), f"not a bench result: {where}: {first['msg']}") from e


def write_report(run: Path, out: Path) -> Path:
    """Render the bench result at `run` (file or directory) to the HTML file `out`."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(load_bench(run)), encoding="utf-8")
    return out


# --------------------------------------------------------------------------- sections


def _summary(bench: BenchFile) -> str:
    # The environment stays as recorded (records.EnvironmentJson): its keys are listed below.
    env = bench.environment
    rows = bench.rows
    policies = _policies(bench)
    gpu = env.get("gpu_name")
    cc = env.get("compute_capability")
    facts = [
        ("suite", bench.suite),
        ("device", bench.device or env.get("device")),
        ("GPU", f"{gpu} (compute capability {cc})" if gpu and cc else gpu or "none"),
        ("budget", f"{_fmt(bench.budget, '.0f')} gate calls per problem and policy"),
        ("date", env.get("date") or bench.created),
        ("created", bench.created),
        ("bench id", bench.id),
        ("problems", len(_problems(bench))),
    ]
    out = ['<dl class="facts">']
    out += [f"<dt>{_e(k)}</dt><dd>{_e(v) if v not in (None, '') else DASH}</dd>" for k, v in facts]
    out.append("</dl>")
    if bench.schema_ not in (None, SCHEMA):
        out.append(
            f'<p class="warn">This file says schema {_e(bench.schema_)}; this report reads '
            f"schema {SCHEMA}. Fields it does not know are not shown.</p>"
        )
    predicted = [r for r in rows if r.predicted]
    if predicted:
        labels = sorted({str(r.label) for r in predicted})
        out.append(
            f'<p class="banner">{len(predicted)} of {len(rows)} results are '
            f"<strong>{_e(' / '.join(labels))}</strong>: no kernel was timed for them "
            f"(device {_e(bench.device)}). Their speedups are predictions, not measurements.</p>"
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
        labels = sorted({str(r.label) for r in rows if r.policy == p} - {"None", ""})

        def why_td(value: float | None, row_key: str, text: str = "", p: str = p) -> str:
            """The summary's value (as a speedup, or as `text`), or why the rows lack it."""
            if value is not None:
                return f'<td class="num">{text}</td>' if text else _td_times(value)
            return f'<td class="num na">{why.dash(policy_reason(bench, p, row_key))}</td>'

        cells = [
            f'<th scope="row">{_e(p)}{"*" if computed else ""}</th>',
            f'<td class="num">{_fmt(s.problems, ".0f")}</td>',
            f'<td class="num">{_fmt(_pct(s.success_rate), ".0f", "%")}</td>',
            why_td(s.geomean_speedup, "speedup"),
            why_td(s.mean_calls_to_95, "calls_to_95", _fmt(s.mean_calls_to_95, ".1f")),
            _td_times(s.anytime_mean)
            if s.anytime_mean is not None
            else f'<td class="num na">{why.dash("no curve: no run gated a candidate")}</td>',
            why_td(s.geomean_vs_eager, "vs_eager"),
            why_td(s.geomean_vs_compile, "vs_compile"),
            why_td(
                s.geomean_fraction_of_expert,
                "fraction_of_expert",
                _fmt(s.geomean_fraction_of_expert, ".2f"),
            ),
        ]
        if seeded:
            g = seed_geomeans(bench, p)
            cells.append(
                f'<td class="num">{min(g):.2f}–{max(g):.2f}×</td>'
                if len(g) > 1
                else f'<td class="num na">{why.dash(empty_reason(bench, _any_row(p), "seed_spread"))}</td>'
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
            + empty_reason(bench, _any_row(policies[0] if policies else ""), "seed_spread")
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


def _any_row(policy: str) -> BenchRow:
    """A row that says only its policy: what the seed-spread reason needs."""
    return BenchRow(policy=policy)


def _applied(items: list[AppliedStep]) -> str:
    if not items:
        return '<span class="muted">nothing kept</span>'
    lis = []
    for a in items:
        extra = ", ".join(
            x
            for x in (_e(a.materializer or ""), _times(a.speedup) if a.speedup is not None else "")
            if x
        )
        lis.append(
            f"<li>{_e(a.label)}"
            + (f' <span class="muted">({extra})</span>' if extra else "")
            + "</li>"
        )
    return '<ul class="applied">' + "".join(lis) + "</ul>"


def render_report(data: BenchFile | Mapping[str, object]) -> str:
    """The whole page for a bench result (a BenchFile, or the dict in bench.json)."""
    bench = as_bench(data)
    skills, bad = bench_skills(bench)
    style = policy_style(_policies(bench))
    title = f"klineage bench {bench.suite or ''} {bench.id or ''}".strip()
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
        curves_section(bench),
        speedups_section(bench, style),
        predicted_section(bench, style),
        roofline_section(bench, style),
        problems_section(bench, _applied),
        lineages_section(skills),
        skills_section(skills, bad),
        "</main>",
        f'<footer class="note">Generated by klineage report from bench {_e(bench.id)} '
        f"(schema {_e(bench.schema_)}).</footer>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
