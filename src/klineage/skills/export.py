"""Skills out and in: JSON (round-trips), Markdown skill cards, Agent Skills folders (SKILL.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import ValidationError

from klineage.errors import LoadError
from klineage.skills.model import Skill, SkillSet


def to_json(skills: list[Skill]) -> str:
    return SkillSet(skills=skills).model_dump_json(indent=2)


def read_json(path: Path) -> list[Skill]:
    """Skills from a JSON export; anything else is a LoadError naming the file and the field."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise LoadError(str(path), "file not found", expected="a klineage skills JSON file") from e
    except json.JSONDecodeError as e:
        raise LoadError(
            str(path),
            f"not JSON: {e.msg}",
            line=e.lineno,
            column=e.colno,
            expected="a klineage skills JSON file",
        ) from e
    try:
        return SkillSet.model_validate(data).skills
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        raise LoadError(
            str(path),
            f"{field}: {first['msg']}",
            expected="the skill schema (klineage skills schema)",
        ) from e


def card(skill: Skill) -> str:
    """A Markdown skill card: what, where, when, what it bought, what it avoids, the code."""
    from klineage.skills.when import regime_label, short_path, when

    lines = [
        f"# {skill.name} (`{skill.id}`)",
        "",
        skill.intent,
        "",
        f"**When:** {when(skill)}",
        "",
        f"- category: {skill.category}",
        f"- anchor: {skill.anchor}",
        f"- rewrite: `{skill.rewrite.pass_name}` with `{json.dumps(skill.rewrite.params, default=str)[:300]}`",
        "",
        "## When it holds",
        "",
    ]
    lines += [f"- ({c.kind}) {c.predicate} — evidence: {c.evidence}" for c in skill.conditions]
    lines += [
        "",
        "## Effects",
        "",
        "| regime | shape | GPU | without (ms) | with (ms) | speedup [range] | counts as |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in skill.effects:
        shape = regime_label(skill, e)
        if e.measured and e.speedup is not None and e.base_ms is not None and e.new_ms is not None:
            rng = f" [{e.lo:.3g}-{e.hi:.3g}]" if e.lo is not None and e.hi is not None else ""
            status = "not run here (noise)" if e.exercised is False else e.status
            lines.append(
                f"| {e.regime} | {shape} | {e.gpu} ({e.arch}) | {e.base_ms:.4g} | {e.new_ms:.4g} | "
                f"{e.speedup:.2f}x{rng} | {status} |"
            )
        else:
            lines.append(f"| {e.regime} | {shape} | – | – | – | – | not measured |")
    lines += ["", "## Failures it avoids", ""]
    lines += [
        f"- {f.attempt} rejected at {f.stage}: {f.message.splitlines()[0][:200] if f.message else ''} ({f.violated_assumption})"
        for f in skill.failures_avoided
    ] or ["- none recorded"]
    lines += [
        "",
        "## Exemplar (the expert's code, without -> with)",
        "",
        "```diff",
        skill.exemplar.diff.rstrip(),
        "```",
        "",
        "## Provenance",
        "",
    ]
    lines += [
        f"- {short_path(p.source_kernel)}, lineage {p.lineage_id} step {p.step}, {p.device}, {p.tool_versions}, {p.date}"
        for p in skill.provenance
    ]
    return "\n".join(lines) + "\n"


def agent_skill_name(skill: Skill) -> str:
    """Agent Skills names: lowercase letters, digits and hyphens, at most 64 characters."""
    return re.sub(r"[^a-z0-9-]+", "-", f"{skill.name}-{skill.id[:8]}".lower()).strip("-")[:64]


def skill_md(skill: Skill) -> str:
    from klineage.skills.when import when

    description = f"{skill.intent} When: {when(skill)} Applies where the code has: {skill.anchor}."
    description = description.replace("\n", " ")[:1024]
    front = f"---\nname: {agent_skill_name(skill)}\ndescription: {json.dumps(description)}\n---\n\n"
    return front + card(skill)


def export(skills: list[Skill], fmt: str, out: Path) -> list[Path]:
    """Write skills as json (one file), md (one card per skill) or skill-md (one folder each)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        path = out / "skills.json"
        path.write_text(to_json(skills), encoding="utf-8")
        return [path]
    written = []
    for s in skills:
        if fmt == "md":
            path = out / f"{agent_skill_name(s)}.md"
            path.write_text(card(s), encoding="utf-8")
        elif fmt == "skill-md":
            folder = out / agent_skill_name(s)
            folder.mkdir(exist_ok=True)
            path = folder / "SKILL.md"
            path.write_text(skill_md(s), encoding="utf-8")
        else:
            from klineage.errors import UsageError

            raise UsageError(f"--format {fmt}: expected json, md or skill-md")
        written.append(path)
    return written
