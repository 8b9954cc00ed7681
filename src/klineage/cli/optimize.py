"""`klineage optimize` and `klineage runs list|show`, with the run summary they print."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

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
from klineage.config import GateConfig
from klineage.errors import KLineageError
from klineage.gate.request import Event


def render_run(summary: Mapping[str, Any]) -> None:
    """The optimize summary (optimize.summary.RunSummary, fresh or as the store gives it back):
    what was applied, per-regime speed, budget used."""
    console.print(
        f"[bold]run {summary['run_id']}[/] ({summary['policy']}, {summary['device']}): {summary['stop_reason']}; "
        f"{summary['gate_calls']}/{summary['budget']} gate calls, {summary['tokens']} LLM tokens, {summary['trials']} trials"
    )
    if summary["applied"]:
        table = Table(title="applied (kept)", title_justify="left")
        for col in ("trial", "what", "how", "effect"):
            table.add_column(col, overflow="fold")
        for a in summary["applied"]:
            eff = (
                f"{a['speedup']:.2f}x measured"
                if a.get("speedup")
                else f"{a['predicted']:.2f}x predicted, not measured"
                if a.get("predicted")
                else ""
            )
            table.add_row(
                str(a["seq"]), escape(a.get("label") or a["proposal"]), a["materializer"], eff
            )
        console.print(table)
    else:
        console.print("nothing was kept: the starting kernel stays the best")
    if summary["regimes"]:
        table = Table(title="speed (measured on the GPU)", title_justify="left")
        for col in (
            "regime",
            "start ms",
            "best ms",
            "speedup",
            "vs eager",
            "vs torch.compile",
            "% of floor",
        ):
            table.add_column(col)
        for r, v in summary["regimes"].items():
            f = lambda x, fmt: fmt.format(x) if x is not None else "–"  # noqa: E731
            table.add_row(
                r,
                f"{v['start_ms']:.4g}",
                f"{v['best_ms']:.4g}",
                f"{v['speedup']:.2f}x",
                f(v["vs_eager"], "{:.2f}x"),
                f(v["vs_compile"], "{:.2f}x"),
                f(v["pct_of_floor"], "{:.0f}%"),
            )
        console.print(table)
        console.print(
            f"geomean speedup over the starting kernel: [bold]{summary['speedup']:.2f}x[/] (measured)"
        )
    else:
        pred = summary.get("predicted")
        console.print(
            "[yellow]predicted, not measured[/]: nothing is timed without a GPU; kept candidates are correct on every "
            "regime and their skills predict a gain"
            + (f" (product of predictions {pred:.2f}x)" if pred else "")
        )


@app.command()
def optimize(
    problem: Annotated[
        Path, typer.Argument(help="KernelBench problem file (the reference and its regimes).")
    ],
    kernel: Annotated[
        Path, typer.Argument(help="A correct starting kernel (ModelNew with Triton kernels).")
    ],
    skills: Annotated[
        Path | None,
        typer.Option("--skills", help="Skills JSON; default: your library, else the shipped one."),
    ] = None,
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm",
            help="LLM for skills with no mechanical site: openai:MODEL, anthropic:MODEL, openai-compatible:URL:MODEL.",
        ),
    ] = None,
    budget: Annotated[
        int, typer.Option(help="Gate calls the candidates may spend (the start is not charged).")
    ] = 10,
    max_tokens: Annotated[
        int | None, typer.Option(help="LLM tokens (in + out) the run may spend.")
    ] = None,
    policy: Annotated[
        str, typer.Option(help="klineage (when-aware skills), what-only, random or llm-feedback.")
    ] = "klineage",
    device: Annotated[
        str, typer.Option(help="cpu (correctness only; gains predicted) or cuda (measured).")
    ] = "cpu",
    regime: Annotated[
        list[str],
        typer.Option(
            "--regime", "-r", help="Regime to gate on (repeatable); default: the device's set."
        ),
    ] = [],  # noqa: B006
    set_: SetOption = [],  # noqa: B006
    margin: Annotated[
        float, typer.Option(help="On a GPU, keep a candidate only if this much faster (0.03 = 3%).")
    ] = 0.03,
    out: Annotated[Path | None, typer.Option("--out", help="Write the best kernel here.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds one gate call may take.")] = 120.0,
    fresh: Annotated[
        bool,
        typer.Option("--fresh", help="Forget a stored run with the same settings and start over."),
    ] = False,
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Optimize a kernel with skills: retrieve those whose conditions hold for the target,
    materialize one at a time (the skill's rewrite where its pass finds a site, the LLM
    otherwise), gate each, keep it only if correct on every regime and faster.

    Every trial is stored; rerun the same command to resume (recorded trials replay without
    gate or LLM calls). Example:

      klineage optimize src/klineage/kernels/softmax/problem.py src/klineage/kernels/softmax/naive.py --out fast.py
    """
    from klineage.llm import connect
    from klineage.optimize import OptimizeRefused, Settings
    from klineage.optimize import optimize as run_optimize

    config = GateConfig.from_env().model_copy(update={"timeout_s": timeout})
    overrides = parse_set(set_)
    try:
        backend = connect(llm) if llm else None
        store, lib, label = _library(db, skills)
        if not as_json:
            console.print(f"{len(lib)} skills from {escape(label)}")
        settings = Settings(
            budget=budget, margin=margin, max_tokens=max_tokens, regimes=regime, overrides=overrides
        )
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        with Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console if as_json else console,
            transient=True,
        ) as progress:
            task = progress.add_task("gating the starting kernel", total=budget)

            def on_event(kind: str, data: Event) -> None:
                if kind == "gating":
                    progress.update(
                        task,
                        description=f"trial {data['seq']}: {data['materializer']} {data['label'][:60]}",
                    )
                elif kind == "trial":
                    progress.advance(task, int(data["gated"]))
                    mark = (
                        "[green]kept[/]"
                        if data["kept"]
                        else (
                            "[yellow]correct[/]"
                            if data["accepted"]
                            else ("[red]rejected[/]" if data["gated"] else "[dim]n/a[/]")
                        )
                    )
                    again = " [dim](replayed)[/]" if data["replayed"] else ""
                    progress.console.print(
                        f"  {data['seq']:>3} {mark} {data['materializer']:<10} {escape(data['label'][:70])}{again}"
                        f" [dim]{escape((data['message'] or '')[:110])}[/]"
                    )
                elif kind == "resume":
                    progress.console.print(
                        f"resuming run {data['id']} ({data['trials']} trials stored)"
                    )

            summary = run_optimize(
                problem,
                kernel,
                store=store,
                skills=lib,
                device=device,
                policy=policy,
                settings=settings,
                config=config,
                llm=backend,
                fresh=fresh,
                on_event=on_event,
            )
    except OptimizeRefused as e:
        err_console.print(f"[red]refused:[/] {escape(str(e))}")
        raise typer.Exit(1) from None
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    if out is not None:
        out.write_text(summary["best_source"], encoding="utf-8")
    if as_json:
        print(
            json.dumps(
                {k: v for k, v in summary.items() if k != "best_source"}, indent=2, default=str
            )
        )
    else:
        render_run(summary)
        if out is not None:
            console.print(f"best kernel written to {out}")


runs_app = typer.Typer(help="Show stored optimize runs and their trials.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")


@runs_app.command("list")
def runs_list(db: DbOption = None) -> None:
    """Every stored optimize run: policy, status, budget used, result."""
    try:
        runs = _open_store(db).list_runs()
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    table = Table(title=f"{len(runs)} optimize runs", title_justify="left")
    for col in ("id", "kernel", "policy", "device", "status", "gate calls", "result"):
        table.add_column(col, overflow="fold")
    for r in runs:
        sm = r.summary or {}
        res = (
            f"{sm['speedup']:.2f}x measured"
            if sm.get("speedup")
            else (sm.get("label") or r.stop_reason)
        )
        table.add_row(
            r.id,
            escape(str(Path(r.kernel_path).relative_to(Path(r.kernel_path).parents[1]))),
            r.policy,
            r.device,
            r.status,
            str(sm.get("gate_calls", "")),
            escape(str(res)),
        )
    console.print(table)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[
        str, typer.Argument(metavar="ID", help="A run id (a unique prefix is enough).")
    ],
    db: DbOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run and its trials as JSON.")
    ] = False,
) -> None:
    """One run's trajectory: every trial (what, how, gate verdict, kept) and the summary."""
    from dataclasses import asdict

    try:
        store = _open_store(db)
        run = store.get_run(run_id)
        if run is None:
            raise KLineageError(
                f"no optimize run {run_id!r} in {store.path}; `klineage runs list` shows them"
            )
        trials = store.trials(run.id)
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    if as_json:
        print(
            json.dumps(
                {
                    "run": asdict(run),
                    "trials": [{k: v for k, v in asdict(t).items() if k != "gate"} for t in trials],
                },
                indent=2,
                default=str,
            )
        )
        return
    table = Table(title=f"run {run.id}: {run.status} ({run.stop_reason})", title_justify="left")
    for col in ("#", "what", "how", "gated", "verdict", "message"):
        table.add_column(col, overflow="fold")
    for t in trials:
        verdict = (
            "kept" if t.kept else ("correct" if t.accepted else ("rejected" if t.gated else "–"))
        )
        table.add_row(
            str(t.seq),
            escape(t.label or t.proposal),
            t.materializer,
            "yes" if t.gated else "no",
            verdict,
            escape(t.message[:160]),
        )
    console.print(table)
    if run.summary:
        render_run(run.summary)
