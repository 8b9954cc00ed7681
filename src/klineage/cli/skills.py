"""`klineage skills ...`: extract, import, list, show, export, retrieve, schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from klineage.cli.common import (
    DbOption,
    SetOption,
    _library,
    _open_store,
    app,
    console,
    err_console,
    parse_set,
)
from klineage.errors import KLineageError

skills_app = typer.Typer(
    help="Skills: lineage steps reversed into optimization records (docs/SKILLS.md).",
    no_args_is_help=True,
)
app.add_typer(skills_app, name="skills")


@skills_app.command("extract")
def skills_extract(
    lineage_id: Annotated[
        list[str],
        typer.Argument(metavar="ID...", help="Stored lineage ids (unique prefixes are enough)."),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Also write the extracted skills to this JSON file."),
    ] = None,
    db: DbOption = None,
) -> None:
    """Reverse every accepted step of the given lineages into skills and merge them into the library."""
    from klineage.skills import extract_skills, to_json
    from klineage.skills.library import add_to_library

    try:
        store = _open_store(db)
        skills = [s for lid in lineage_id for s in extract_skills(store, lid)]
        created, updated = add_to_library(store, skills)
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    if out is not None:
        out.write_text(to_json(skills), encoding="utf-8")
    measured = sum(1 for s in skills if any(e.measured for e in s.effects))
    console.print(
        f"{len(skills)} skills extracted ({measured} with measured effects): {created} new in the library, {updated} merged into existing ones"
        + (f"; written to {out}" if out else "")
    )


@skills_app.command("import")
def skills_import(
    source: Annotated[
        Path,
        typer.Argument(
            help="Skills JSON (from `klineage skills export --format json` or `extract --out`)."
        ),
    ],
    db: DbOption = None,
) -> None:
    """Merge a JSON skills file into the library (same pass and anchor: one skill, more evidence)."""
    from klineage.skills import read_json
    from klineage.skills.library import add_to_library

    try:
        created, updated = add_to_library(_open_store(db), read_json(source))
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    console.print(f"imported {source}: {created} new skills, {updated} merged into existing ones")


@skills_app.command("list")
def skills_list(db: DbOption = None) -> None:
    """List the library's skills: confidence (source kernels), category, where each paid off."""
    try:
        _, skills, label = _library(db)
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    if not skills:
        console.print(
            "the library is empty: `klineage distill` an expert, then `klineage skills extract ID`, or `klineage skills import FILE`"
        )
        return
    from klineage.skills.when import when

    # Readable at 100 columns: a short id, the name, how many expert kernels it came from, and
    # when it pays (skills/when.py); `skills show ID` has the rest.
    table = Table(title=f"{len(skills)} skills from {label}", title_justify="left")
    table.add_column("id", no_wrap=True)
    table.add_column("skill", no_wrap=True)
    table.add_column("from", justify="right", no_wrap=True)
    table.add_column("when it pays (measured)", overflow="fold", ratio=1)
    for s in skills:
        table.add_row(
            s.id[:8], s.name, str(len({p.source_kernel for p in s.provenance})), escape(when(s))
        )
    console.print(table)


@skills_app.command("show")
def skills_show(
    skill_id: Annotated[
        str, typer.Argument(metavar="ID", help="A skill id (a unique prefix is enough).")
    ],
    db: DbOption = None,
) -> None:
    """Print one skill's card: intent, conditions with evidence, effects, failures avoided, exemplar."""
    from klineage.skills.export import card

    try:
        _, skills, _ = _library(db)
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    match = [s for s in skills if s.id.startswith(skill_id)]
    if len(match) != 1:
        err_console.print(
            f"[red]error:[/] {len(match)} skills in the library match {skill_id!r}; `klineage skills list` shows them"
        )
        raise typer.Exit(2)
    print(card(match[0]))


@skills_app.command("export")
def skills_export(
    fmt: Annotated[
        str,
        typer.Option("--format", help="json, md (skill cards) or skill-md (Agent Skills folders)."),
    ] = "skill-md",
    out: Annotated[Path, typer.Option("--out", help="Directory to write into.")] = Path("skills"),
    source: Annotated[
        Path | None, typer.Option("--from", help="Export this JSON file instead of the library.")
    ] = None,
    db: DbOption = None,
) -> None:
    """Export the library (or a JSON file) as JSON, Markdown cards or Agent Skills folders (SKILL.md)."""
    from klineage.skills import export, read_json

    try:
        skills = read_json(source) if source is not None else _library(db)[1]
        written = export(skills, fmt, out)
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    console.print(f"wrote {len(written)} file(s) under {out}")


@skills_app.command("retrieve")
def skills_retrieve(
    problem: Annotated[
        Path,
        typer.Argument(
            help="The target's problem file (its regimes are what the skills are matched to)."
        ),
    ],
    kernel: Annotated[Path, typer.Argument(help="The target kernel file (ModelNew).")],
    device: Annotated[str, typer.Option(help="Target device: cuda or cpu.")] = "cuda",
    capability: Annotated[
        str | None, typer.Option(help="Target compute capability, e.g. 9.0 (H100/H200).")
    ] = "9.0",
    set_: SetOption = [],  # noqa: B006
    db: DbOption = None,
) -> None:
    """The library's skills for a target kernel: selected (static conditions hold, measured ones
    predict a gain on some regime) ranked by predicted speedup, then the excluded, each with why.
    The conditions are read at the problem's regimes, at the sizes --set gives them."""
    from klineage.problem.loader import check_overrides
    from klineage.problem.shapes import features
    from klineage.skills.conditions import problem_shapes, shapes_of
    from klineage.skills.retrieve import retrieve

    try:
        overrides = parse_set(set_)
        check_overrides(problem, overrides)
        _, skills, label = _library(db)
        console.print(f"skills from {escape(label)}")
        # As optimize matches them: on a GPU, to the regimes it would time.
        from klineage.optimize.decide import timed_regimes

        inputs = problem_shapes(problem, overrides)
        target = {r: features(e) for r, e in inputs.items()}
        timed = timed_regimes(problem.read_text(encoding="utf-8"), list(target), device)
        target = {r: f for r, f in target.items() if r in timed} if timed else target
        results = retrieve(
            skills,
            problem,
            kernel,
            device=device,
            capability=capability,
            target=target,
            shapes=shapes_of(inputs),
        )
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    table = Table(
        title=f"skills for {kernel.name} ({len([r for r in results if r.selected])} selected of {len(results)}); predictions, not measurements",
        title_justify="left",
    )
    for col in ("", "skill", "id", "predicted", "why"):
        table.add_column(col, overflow="fold")
    for r in results:
        table.add_row(
            "[green]use[/]" if r.selected else "[dim]skip[/]",
            r.skill.name,
            r.skill.id,
            f"{r.score:.2f}x" if r.predicted else "?",
            escape("\n".join(r.reasons)),
        )
    console.print(table)


@skills_app.command("schema")
def skills_schema(
    out: Annotated[
        Path | None, typer.Option("--out", help="File to write; default: print.")
    ] = None,
) -> None:
    """Print (or write) the versioned JSON Schema of the skills file."""
    from klineage.skills import SkillSet

    text = json.dumps(SkillSet.model_json_schema(), indent=2) + "\n"
    if out is None:
        print(text, end="")
    else:
        out.write_text(text, encoding="utf-8")
