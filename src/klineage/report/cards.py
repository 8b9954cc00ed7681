"""The bench's skills as cards (conditions, effects, failures avoided, the exemplar's diff,
provenance) and their lineages as chains of steps, from the expert kernel to the simplest one."""

from __future__ import annotations

import json

from pydantic import ValidationError

from klineage.bench.records import BenchFile
from klineage.report.values import DASH, _cls, _e, _fmt, _section, _short_path, _td_times, _times
from klineage.skills.model import Provenance, Skill


def bench_skills(bench: BenchFile) -> tuple[list[Skill], list[str]]:
    """The bench's skills as records; those that do not validate become notes."""
    skills, bad = [], []
    for i, raw in enumerate(bench.skills):
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


def lineages_section(skills: list[Skill]) -> str:
    by: dict[str, list[tuple[int, Skill]]] = {}
    meta: dict[str, Provenance] = {}
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


def skills_section(skills: list[Skill], bad: list[str]) -> str:
    out = []
    if not skills:
        out.append('<p class="note">No skills in this bench result.</p>')
    out += [_skill_card(s) for s in skills]
    out += [f'<p class="warn">Not shown, does not match the skill schema: {_e(b)}</p>' for b in bad]
    return _section("skills", f"Skills ({len(skills)})", "\n".join(out))
