"""`klineage demo`: gate, backward walk, skills and optimize end to end on the CPU."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from klineage.cli.common import app, console
from klineage.cli.distill import render_lineage
from klineage.cli.gate import render_gate
from klineage.cli.optimize import render_run
from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.gate.request import Event


@app.command()
def demo(
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Re-run even if cached.")] = False,
) -> None:
    """The idea end to end on the CPU, in about two minutes:

    1. the gate accepts a correct softmax kernel and rejects one with an off-by-one mask;
    2. the RMSNorm expert is walked backward (distill), one gated simplification per step;
    3. its steps, reversed, become skills (effects "not measured": there is no GPU here);
    4. the naive softmax kernel (another workload) is optimized with those skills, merged with
       the H200-measured library klineage ships: kept candidates pass the gate, their gains
       are predicted, not measured.
    """
    from klineage.config import default_cache_dir
    from klineage.lineage import distill as run_distill
    from klineage.lineage import load_view
    from klineage.skills import extract_skills
    from klineage.store import open_store

    root = resources.files("klineage")
    problem = Path(str(root / "examples" / "softmax" / "problem.py"))
    config = GateConfig.from_env().model_copy(
        update={"cache": not no_cache, "reference_cache": not no_cache}
    )
    verdicts = []
    for name in ("candidate.py", "broken_mask.py"):
        console.rule(f"[bold]1. the gate: {name}")
        with console.status(f"gating {name} on the CPU (Triton interpreter)"):
            result = run_gate(
                problem,
                Path(str(root / "examples" / "softmax" / name)),
                device="cpu",
                config=config,
            )
        render_gate(result)
        verdicts.append(result.accepted)

    console.rule("[bold]2. the backward walk: the RMSNorm expert")
    kernels = Path(str(root / "kernels" / "rmsnorm"))
    store = open_store(default_cache_dir() / "demo.db")
    with console.status("distill: gating one simplification at a time") as status:

        def on_event(kind: str, data: Event) -> None:
            if kind == "result":
                status.update(
                    f"distill: {data['pass']} at {data['site'].split('@')[-1]}: {'kept' if data['accepted'] else 'not kept'}"
                )

        lid = run_distill(
            kernels / "problem.py",
            kernels / "expert.py",
            store=store,
            device="cpu",
            regimes=["tiny", "long_row"],
            config=config.model_copy(update={"profile_compile": False, "allow_suspicious": True}),
            on_event=on_event,
        )
    view = load_view(store, lid)
    render_lineage(view)

    console.rule("[bold]3. skills: each step reversed")
    skills = extract_skills(store, lid)
    table = Table(
        title=f"{len(skills)} skills from the RMSNorm lineage (effects need a GPU: `--device cuda`)",
        title_justify="left",
    )
    for col in ("skill", "category", "adds, where the expert had it", "effect"):
        table.add_column(col, overflow="fold")
    for sk in skills:
        where = sk.intent.rpartition("(as at ")[2].removesuffix(")")
        table.add_row(
            sk.name,
            sk.category,
            escape(where[:110]),
            "measured" if any(e.measured for e in sk.effects) else "[yellow]not measured[/]",
        )
    console.print(table)

    console.rule("[bold]4. optimize: the naive softmax kernel, with skills")
    from klineage.optimize import Settings
    from klineage.optimize import optimize as run_optimize
    from klineage.skills.library import add_to_library, library_skills, load_library

    # The RMSNorm skills just made carry no timing (no GPU here); the library shipped with
    # klineage holds the same optimizations measured on an H200. Merged, the demo's evidence
    # and the measured one decide together which skills to try on another workload.
    shipped, label = load_library(None)
    add_to_library(store, skills)
    add_to_library(store, shipped)
    library = library_skills(store)
    console.print(
        f"{len(library)} skills: the {len(skills)} from this lineage merged with {escape(label)}"
    )
    softmax = Path(str(root / "kernels" / "softmax"))
    with console.status("optimize: materializing skills one at a time, each gated") as status:

        def on_trial(kind: str, data: Event) -> None:
            if kind == "trial":
                verdict = (
                    "kept"
                    if data["kept"]
                    else (
                        "correct" if data["accepted"] else ("rejected" if data["gated"] else "n/a")
                    )
                )
                msg = data["message"] or ""
                shown = "" if msg.startswith(verdict) else verdict
                console.print(
                    f"  trial {data['seq']}: {escape(data['label'][:70])} -> {shown} [dim]{escape(msg[:100])}[/]"
                )
                status.update(f"optimize: trial {data['seq']} done")

        summary = run_optimize(
            softmax / "problem.py",
            softmax / "naive.py",
            store=store,
            skills=library,
            device="cpu",
            settings=Settings(budget=3, regimes=["tiny_rows", "odd"]),
            config=config,
            on_event=on_trial,
        )
    render_run(summary)
    ok = (
        verdicts == [True, False]
        and view.lineage.status == "done"
        and len(skills) > 0
        and summary["gate_calls"] > 0
    )
    console.print(
        "[green]demo: gate, backward walk, skills and optimize all ran[/] (on a GPU, `--device cuda` measures what is predicted here)"
        if ok
        else "[red]demo: unexpected result[/]"
    )
    raise typer.Exit(0 if ok else 1)
