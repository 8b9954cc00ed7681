"""`klineage bench` (every policy on a suite) and `klineage report` (its HTML page)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from klineage.cli.common import DbOption, SetOption, app, console, err_console, parse_set
from klineage.config import GateConfig
from klineage.errors import KLineageError

if TYPE_CHECKING:
    from klineage.bench.records import BenchRow


@app.command()
def bench(
    suite: Annotated[
        str,
        typer.Option(
            help="corpus (leave-one-out), heldout (problems no skill came from), or a folder of "
            "your problems with starting kernels: one folder each (problem.py + naive.py), or "
            "KernelBench's NAME.py files each with NAME_start.py beside it."
        ),
    ] = "heldout",
    policies: Annotated[
        str,
        typer.Option(
            help="Comma-separated: klineage, what-only, random, adaexplore, accelopt, llm-feedback."
        ),
    ] = "klineage,what-only,random,adaexplore,accelopt",
    budget: Annotated[int, typer.Option(help="Gate calls per (problem, policy) run.")] = 10,
    seeds: Annotated[
        int,
        typer.Option(
            help="Runs of each seed-dependent policy (random, adaexplore, accelopt) with seeds 0..N-1; one fixed order is one draw, not random search. Summaries take the geomean over seeds per problem."
        ),
    ] = 1,
    device: Annotated[
        str, typer.Option(help="cpu (correctness; gains predicted) or cuda (measured).")
    ] = "cpu",
    executor: Annotated[
        str, typer.Option(help="local (a process pool, one worker per GPU) or ray.")
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(help="Ray cluster address (with --executor ray); default: start a local one."),
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="Local workers (default: --per-gpu per GPU; 1 on the CPU).")
    ] = None,
    per_gpu: Annotated[
        int,
        typer.Option(
            help="Workers sharing one GPU: they overlap start-up and compiles; the gate locks the GPU for correctness and timing."
        ),
    ] = 1,
    problems: Annotated[
        str, typer.Option(help="Comma-separated problem names of the suite (default: all).")
    ] = "",
    regime: Annotated[
        list[str],
        typer.Option(
            "--regime", "-r", help="Regime to gate on (repeatable); default: the device's set."
        ),
    ] = [],  # noqa: B006
    llm: Annotated[
        str | None, typer.Option("--llm", help="LLM spec for LLM materializers and LLM baselines.")
    ] = None,
    rollouts: Annotated[
        Path | None,
        typer.Option(
            help="Database with the `random` rollouts on the corpus the memory baselines learn from (default: --db)."
        ),
    ] = None,
    skills: Annotated[
        Path | None,
        typer.Option(
            "--skills",
            help="Skills JSON the skill policies use (default: the shipped library; the corpus "
            "suite's leave-one-out libraries are built from the shipped steps unless this is given).",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Directory for bench.json and the knowledge files.")
    ] = Path("bench-runs/latest"),
    quick: Annotated[
        bool, typer.Option(help="Shorter timing (10 ms warm-up, 40 ms measured) for many runs.")
    ] = False,
    compile_ref: Annotated[
        bool,
        typer.Option(
            "--compile/--no-compile",
            help="Also time torch.compile of the reference (once per problem; slow to compile).",
        ),
    ] = True,
    set_: SetOption = [],  # noqa: B006
    db: DbOption = None,
) -> None:
    """Every problem of a suite under every policy, same loop, gate and budget: success,
    speedups (over naive, eager, torch.compile), fraction of the expert or floor, gate calls to
    95% of the final best, anytime curves, geomeans. Writes OUT/bench.json after each run.

    The memory baselines learn from `random` rollouts on the corpus; make them first with
    `klineage bench --suite corpus --policies random`. Example:

      klineage bench --suite heldout --device cuda --budget 10 --out bench-runs/h200

    A folder of KernelBench files at sizes the CPU can run (each NAME=VALUE rebinds the
    problems that assign NAME; the others keep theirs):

      klineage bench --suite kb/ --set batch_size=8 --set dim=300 --budget 2
    """
    from klineage.bench import run_bench
    from klineage.store import default_db_path

    config = GateConfig.from_env().model_copy(update={"profile_compile": compile_ref})
    if quick:
        config = config.model_copy(update={"timing_rounds": 3, "timing_samples": 2})
    names = [p for p in policies.split(",") if p]
    try:
        if llm:  # a missing key or an unreachable server fails here, before any run
            from klineage.llm import connect

            connect(llm)
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            task = progress.add_task(f"bench {suite}", total=None)

            def on_row(row: BenchRow, done: int, total: int) -> None:
                progress.update(task, total=total, completed=done)
                sp = row.speedup
                res = f"{sp:.2f}x" if sp else (row.label or "")
                progress.console.print(
                    f"  {row.problem:<42} {row.policy:<12} "
                    + (
                        f"[red]{escape(row.error[:100])}[/]"
                        if row.error
                        else f"{res} in {row.gate_calls or 0} gate calls"
                    )
                )

            result = run_bench(
                suite,
                policies=names,
                budget=budget,
                device=device,
                out=out,
                db=db or default_db_path(),
                executor=executor,
                address=address,
                workers=workers,
                per_gpu=per_gpu,
                problems=[p for p in problems.split(",") if p] or None,
                regimes=regime,
                config=config,
                llm=llm,
                seeds=seeds,
                rollouts_db=rollouts,
                skills_file=skills,
                on_row=on_row,
                overrides=parse_set(set_),
            )
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    table = Table(
        title=f"bench {suite} ({device}, budget {budget}): geomeans over problems",
        title_justify="left",
    )
    for col in (
        "policy",
        "problems",
        "success",
        "improved",
        "speedup",
        "vs eager",
        "vs compile",
        "of expert",
        "calls to 95%",
        "anytime",
    ):
        table.add_column(col)
    f = lambda x, fmt: fmt.format(x) if x is not None else "–"  # noqa: E731
    for p, v in result.summary.items():
        table.add_row(
            p,
            str(v.problems),
            f(v.success_rate, "{:.0%}"),
            str(v.improved),
            f(v.geomean_speedup, "{:.2f}x"),
            f(v.geomean_vs_eager, "{:.2f}x"),
            f(v.geomean_vs_compile, "{:.2f}x"),
            f(v.geomean_fraction_of_expert, "{:.0%}"),
            f(v.mean_calls_to_95, "{:.1f}"),
            f(v.anytime_mean, "{:.2f}x"),
        )
    console.print(table)
    for note in result.notes[:3]:
        console.print(f"[yellow]note:[/] {escape(note)}")
    if device != "cuda":
        console.print(
            "[yellow]predicted, not measured[/]: on the CPU nothing is timed; speedups need --device cuda"
        )
    console.print(f"results: {out / 'bench.json'}  (klineage report {out} --out report.html)")


@app.command()
def report(
    run: Annotated[Path, typer.Argument(help="A bench.json, or the directory holding one.")],
    out: Annotated[Path, typer.Option("--out", help="The HTML file to write.")] = Path(
        "report.html"
    ),
) -> None:
    """A self-contained HTML page of a bench run: summary tables, anytime curves, lineage graphs
    and skill cards."""
    from klineage.report import write_report

    try:
        path = write_report(run, out)
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    console.print(f"wrote {path}")
