"""`klineage distill` (the backward walk) and `klineage lineage show|list`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from klineage.cli.common import (
    DbOption,
    SetOption,
    _open_store,
    app,
    console,
    err_console,
    parse_set,
)
from klineage.config import GateConfig
from klineage.errors import KLineageError
from klineage.gate.request import Event


def render_lineage(view: Any) -> None:
    lin = view.lineage
    console.print(
        f"[bold]lineage {lin.id}[/]  {escape(Path(lin.expert_path).name)} on {escape(Path(lin.problem_path).name)}, "
        f"device {lin.device}, policy {lin.policy}: [bold]{lin.status}[/] ({escape(lin.stop_reason)})"
    )
    table = Table(
        title="expert -> simplest (each step removes one optimization)", title_justify="left"
    )
    table.add_column("step", justify="right")
    table.add_column("removed (pass)", no_wrap=True)
    table.add_column("where", no_wrap=True)
    table.add_column("what", overflow="fold", ratio=2)
    table.add_column("held on regimes")
    table.add_column("speedup it bought, per regime", overflow="fold")
    for s in view.path:
        speed = (
            ", ".join(f"{r} {x:.2f}x" for r, x in s.speedup.items())
            if s.speedup
            else "[yellow]not measured[/]"
        )
        table.add_row(
            str(s.step),
            s.rewrite,
            escape(f"{s.function or '<module>'}:{s.line}"),
            escape((s.description.splitlines() or [""])[0][:90]),
            ", ".join(s.held_regimes),
            speed,
        )
    console.print(table)
    rejected = [s for s in view.steps if s.applied and not s.accepted]
    skipped = [s for s in view.steps if not s.applied]
    if rejected:
        rt = Table(
            title="rejected by the gate (the failures these optimizations' assumptions avoid)",
            title_justify="left",
        )
        rt.add_column("step", justify="right")
        rt.add_column("pass")
        rt.add_column("where")
        rt.add_column("stage: why", overflow="fold")
        for s in rejected:
            rt.add_row(
                str(s.step),
                s.rewrite,
                escape(f"{s.function}:{s.line}"),
                escape(f"{s.stage}: {s.message[:300]}"),
            )
        console.print(rt)
    console.print(
        f"[dim]{len(view.steps)} attempts: {len(view.path)} accepted steps, {len(rejected)} rejected, {len(skipped)} did not apply[/]"
    )


@app.command()
def distill(
    problem: Annotated[Path, typer.Argument(help="KernelBench problem file the expert solves.")],
    expert: Annotated[
        Path, typer.Argument(help="Expert candidate file (ModelNew with Triton kernels).")
    ],
    device: Annotated[
        str,
        typer.Option(
            help="cpu (interpreter: correctness only) or cuda (also measures each step's effect)."
        ),
    ] = "cpu",
    policy: Annotated[
        str,
        typer.Option(
            help="least_cost (default), most_cost, first or exhaustive; see docs/LINEAGE.md."
        ),
    ] = "least_cost",
    max_steps: Annotated[int, typer.Option(help="Stop after this many accepted steps.")] = 50,
    regime: Annotated[
        list[str],
        typer.Option(
            "--regime", "-r", help="Regime to gate on (repeatable); default: the device's set."
        ),
    ] = [],  # noqa: B006
    set_: SetOption = [],  # noqa: B006
    passes: Annotated[
        str, typer.Option(help="Comma-separated rewrite passes to use (default: all).")
    ] = "",
    timeout: Annotated[float, typer.Option(help="Seconds one gate call may take.")] = 120.0,
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm",
            help="Also ask this LLM to remove one optimization it names, after the registered passes (openai:MODEL, ...).",
        ),
    ] = None,
    probe: Annotated[
        bool,
        typer.Option(
            help="After the walk, add each step's optimization back to the simplest kernel and gate it (one call per distinct candidate): its effect where optimize starts, next to the expert's context."
        ),
    ] = False,
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the lineage as JSON.")] = False,
) -> None:
    """Walk an expert kernel backward: propose every one-optimization simplification, gate it, keep
    one per step (chosen by --policy), until no registered optimization remains.

    Every attempt is stored as soon as it is gated; rerun the same command to resume an
    interrupted walk. Example:

      klineage distill src/klineage/kernels/softmax/problem.py src/klineage/kernels/softmax/expert.py
    """
    from klineage.lineage import distill as run_distill
    from klineage.lineage import load_view

    config = GateConfig.from_env().model_copy(
        update={"timeout_s": timeout, "profile_compile": False, "allow_suspicious": True}
    )
    overrides = parse_set(set_)
    try:
        from klineage.llm import connect

        backend = connect(llm) if llm else None
        store = _open_store(db)
        names = [n for n in passes.split(",") if n] or None
        walk = dict(
            store=store,
            device=device,
            policy=policy,
            max_steps=max_steps,
            regimes=regime,
            config=config,
            pass_names=names,
            llm=backend,
            overrides=overrides,
        )
        if as_json:
            lid = run_distill(problem, expert, **walk)
        else:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            columns = (
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
            )
            with Progress(*columns, console=console, transient=True) as progress:
                task = progress.add_task("gating the expert", total=None)
                counts = {"gated": 0, "accepted": 0, "step": 0}

                def on_event(kind: str, data: Event) -> None:
                    if kind == "step":
                        # One bar per step: the candidates (pass, site) competing for it.
                        counts["step"] = data["step"]
                        progress.reset(
                            task,
                            total=data["candidates"],
                            description=f"step {data['step']}: candidates",
                        )
                    elif kind == "attempt":
                        where = data["site"].split("@")[-1]
                        progress.update(
                            task,
                            description=f"step {counts['step']}: {data['pass']} at {where} ({counts['gated']} gate calls)",
                        )
                    elif kind == "result":
                        counts["gated"] += int(data["applied"])
                        progress.advance(task)
                        mark = (
                            "[green]kept[/]"
                            if data["accepted"]
                            else ("[red]rejected[/]" if data["applied"] else "[dim]n/a[/]")
                        )
                        progress.console.print(
                            f"  step {counts['step']:>2} {mark} {data['pass']} {escape(data['site'].split('@')[-1])}"
                            + (
                                ""
                                if data["accepted"]
                                else f" [dim]{escape(data['message'][:120])}[/]"
                            )
                        )
                    elif kind == "accepted":
                        counts["accepted"] += 1
                    elif kind == "resume":
                        progress.console.print(
                            f"resuming lineage {data['id']} at step {data['step']}"
                        )

                lid = run_distill(problem, expert, on_event=on_event, **walk)
        if probe and store.get_lineage(lid).status == "done":
            _probe(store, lid, config, quiet=as_json)
        view = load_view(store, lid)
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(view.as_json(), indent=2))
    else:
        render_lineage(view)
    raise typer.Exit(0 if view.lineage.status == "done" else 1)


def _probe(store: Any, lid: str, config: GateConfig, *, quiet: bool) -> None:
    from klineage.lineage.probe import probe_lineage

    def on_event(kind: str, data: Event) -> None:
        if quiet or kind != "probed":
            return
        mark = (
            "[green]ok[/]"
            if data["accepted"]
            else ("[red]rejected[/]" if data["applied"] else "[dim]n/a[/]")
        )
        onto = " (on the naive kernel)" if data.get("onto") == "naive" else ""
        console.print(
            f"  probe step {data['step']:>2} {mark} {data['pass']}{onto} [dim]{escape(data['message'][:120])}[/]"
        )

    if not quiet:
        console.print("forward probes: each step's optimization added back to the simplest kernel")
    probe_lineage(store, lid, config=config, on_event=on_event)


lineage_app = typer.Typer(help="Show stored lineages.", no_args_is_help=True)
app.add_typer(lineage_app, name="lineage")


@lineage_app.command("show")
def lineage_show(
    lineage_id: Annotated[
        str, typer.Argument(metavar="ID", help="Lineage id (a unique prefix is enough).")
    ],
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    source: Annotated[
        int | None, typer.Option("--source", help="Print the kernel source at this step.")
    ] = None,
) -> None:
    """Show a stored lineage: its steps, the regimes where each held, the effects and rejections."""
    from klineage.lineage import load_view

    try:
        view = load_view(_open_store(db), lineage_id)
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    if source is not None:
        if not 0 <= source < len(view.sources):
            err_console.print(f"[red]error:[/] step {source} not in 0..{len(view.sources) - 1}")
            raise typer.Exit(2)
        print(view.sources[source])
    elif as_json:
        print(json.dumps(view.as_json(), indent=2))
    else:
        render_lineage(view)


@lineage_app.command("list")
def lineage_list(db: DbOption = None) -> None:
    """List stored lineages."""
    try:
        store = _open_store(db)
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    table = Table()
    for col in ("id", "expert", "device", "policy", "status", "steps", "updated"):
        table.add_column(col)
    for lin in store.list_lineages():
        table.add_row(
            lin.id,
            escape(
                str(
                    Path(lin.expert_path).relative_to(Path.cwd())
                    if Path(lin.expert_path).is_relative_to(Path.cwd())
                    else lin.expert_path
                )
            ),
            lin.device,
            lin.policy,
            f"{lin.status} ({lin.stop_reason})",
            str(len(store.nodes(lin.id)) - 1),
            lin.updated,
        )
    console.print(table)
