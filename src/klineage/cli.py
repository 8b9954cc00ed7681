"""The klineage command line. The only module that prints and exits.

Exit codes: 0 accepted / success, 1 rejected, 2 usage or loading error.
"""

from __future__ import annotations

import ast
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from klineage import __version__
from klineage.config import GateConfig
from klineage.errors import KLineageError
from klineage.gate import GateResult, Stage, Status, run_gate
from klineage.gate.runner import result_json

app = typer.Typer(
    name="klineage",
    help="Learn when GPU kernel optimizations pay off and are safe, from expert kernels.\n\n"
    "Start with `klineage gate PROBLEM CANDIDATE --device cpu`: it checks a Triton candidate "
    "(a KernelBench ModelNew file) against a reference problem, stage by stage.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

STATUS_STYLE = {
    Status.PASSED: "[green]passed[/]",
    Status.FAILED: "[bold red]FAILED[/]",
    Status.SKIPPED: "[dim]skipped[/]",
    Status.NOT_MEASURED: "[yellow]not measured[/]",
}


def _parse_set(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name.isidentifier():
            raise typer.BadParameter(
                f"{item!r}: expected NAME=VALUE, e.g. batch_size=8", param_hint="--set"
            )
        try:
            out[name] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[name] = raw
    return out


def _parse_tolerances(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        dtype, sep, raw = item.partition("=")
        try:
            out[dtype] = float(raw)
        except ValueError:
            sep = ""
        if not sep:
            raise typer.BadParameter(
                f"{item!r}: expected DTYPE=TOL, e.g. float16=1e-2", param_hint="--tol"
            )
    return out


def render_gate(result: GateResult) -> None:
    title = f"gate: {Path(result.candidate).name} vs {Path(result.problem).name} on {result.device}"
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("stage")
    table.add_column("status")
    table.add_column("details", overflow="fold")
    for s in result.stages:
        details = escape(s.message)
        if s.regimes and s.stage in (Stage.CORRECTNESS, Stage.PROFILE):
            lines = []
            for o in s.regimes:
                err = (
                    f", max abs err {o.max_abs_err:.2e} (tol {o.tolerance:g})"
                    if o.max_abs_err is not None and o.tolerance
                    else ""
                )
                lines.append(f"{o.regime}: {STATUS_STYLE[o.status]} {escape(o.message)}{err}")
            details = "\n".join(lines)
        table.add_row(s.stage.value, STATUS_STYLE[s.status], details)
    console.print(table)
    env = result.environment
    if env is not None:
        where = (
            env.gpu_name or "CPU (Triton interpreter)"
            if env.interpreter
            else env.gpu_name or env.device
        )
        console.print(
            f"[dim]environment: {where}; torch {env.torch}, triton {env.triton}, klineage {env.klineage}; timing: {env.timing_method}; {env.date}[/]"
        )
    cached = " (cached)" if result.cached else ""
    verdict = (
        "[bold green]ACCEPTED[/]"
        if result.accepted
        else f"[bold red]REJECTED[/] at {result.failed_stage.value if result.failed_stage else '?'}"
    )
    console.print(f"{verdict}{cached} in {result.seconds:.1f} s")


def _exit_code(result: GateResult) -> int:
    if result.accepted:
        return 0
    return 2 if result.failed_stage is Stage.LOAD else 1


@app.command()
def gate(
    problem: Annotated[
        Path,
        typer.Argument(
            help="KernelBench problem file (class Model, get_inputs, optional REGIMES)."
        ),
    ],
    candidate: Annotated[
        Path, typer.Argument(help="Candidate file with class ModelNew launching Triton kernels.")
    ],
    regime: Annotated[
        list[str],
        typer.Option(
            "--regime",
            "-r",
            help="Regime to check (repeatable). Default: CPU_REGIMES on cpu, all on cuda.",
        ),
    ] = [],  # noqa: B006
    device: Annotated[
        str,
        typer.Option(help="cpu (Triton interpreter, no timing) or cuda (compile, check, time)."),
    ] = "cpu",
    timeout: Annotated[
        float, typer.Option(help="Seconds one gate call may take; a hang past it is a rejection.")
    ] = 120.0,
    trials: Annotated[int, typer.Option(help="Random trials per regime (at least 5).")] = 5,
    set_: Annotated[
        list[str],
        typer.Option(
            "--set",
            help="Override a problem global for a CPU-sized check, e.g. --set batch_size=8.",
        ),
    ] = [],  # noqa: B006
    tol: Annotated[
        list[str],
        typer.Option(
            "--tol", help="Tolerance per dtype, e.g. --tol float16=2e-2 (never above 5e-2)."
        ),
    ] = [],  # noqa: B006
    allow_suspicious: Annotated[
        bool, typer.Option(help="Accept results faster than the roofline floor or 10x eager.")
    ] = False,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Re-run even if this exact check is cached.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check a candidate kernel against a problem: load, static guards, compile, runtime guards,
    correctness on every regime (>= 5 random trials each, every autotune config), and on cuda the
    profile (median with L2 flushed, vs eager and torch.compile).

    Exit 0 accepted, 1 rejected, 2 usage or loading error.

    Example: klineage gate src/klineage/examples/softmax/problem.py src/klineage/examples/softmax/candidate.py
    """
    try:
        base = GateConfig.from_env()
        tolerances = {**base.tolerances, **_parse_tolerances(tol)}
        config = base.model_copy(
            update={
                "timeout_s": timeout,
                "trials": trials,
                "allow_suspicious": allow_suspicious,
                "cache": base.cache and not no_cache,
            }
        )
        config = GateConfig.model_validate({**config.model_dump(), "tolerances": tolerances})
    except (ValueError, KLineageError) as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    overrides = _parse_set(set_)
    try:
        if as_json:
            result = run_gate(
                problem,
                candidate,
                device=device,
                regimes=regime,
                overrides=overrides,
                config=config,
            )
        else:
            with console.status("gate: starting") as status:

                def on_event(ev: dict[str, Any]) -> None:
                    if ev["type"] == "start":
                        status.update(f"gate: {ev['stage']} {ev.get('detail', '')}")
                    elif ev["type"] == "progress":
                        status.update(f"gate: {ev['detail']}")

                result = run_gate(
                    problem,
                    candidate,
                    device=device,
                    regimes=regime,
                    overrides=overrides,
                    config=config,
                    on_event=on_event,
                )
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    if as_json:
        print(result_json(result))
    else:
        render_gate(result)
    raise typer.Exit(_exit_code(result))


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
    config = GateConfig.from_env().model_copy(update={"cache": not no_cache})
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

        def on_event(kind: str, data: dict[str, Any]) -> None:
            if kind == "result":
                status.update(
                    f"distill: {data['pass']} at {data['site'].split('@')[-1]}: {'kept' if data['accepted'] else 'not kept'}"
                )

        lid = run_distill(kernels / "problem.py", kernels / "expert.py", store=store, device="cpu", regimes=["tiny", "long_row"],
                          config=config.model_copy(update={"profile_compile": False, "allow_suspicious": True}), on_event=on_event)  # fmt: skip
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

        def on_trial(kind: str, data: dict[str, Any]) -> None:
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

        summary = run_optimize(softmax / "problem.py", softmax / "naive.py", store=store, skills=library, device="cpu",
                               settings=Settings(budget=3, regimes=["tiny_rows", "odd"]), config=config, on_event=on_trial)  # fmt: skip
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


def _open_store(db: Path | None) -> Any:
    from klineage.store import open_store

    return open_store(db)


DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="SQLite database (default: $KLINEAGE_DB or ~/.local/share/klineage/klineage.db).",
    ),
]


def render_lineage(view: Any) -> None:
    lin = view.lineage
    console.print(f"[bold]lineage {lin.id}[/]  {escape(Path(lin.expert_path).name)} on {escape(Path(lin.problem_path).name)}, "
                  f"device {lin.device}, policy {lin.policy}: [bold]{lin.status}[/] ({escape(lin.stop_reason)})")  # fmt: skip
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
    try:
        from klineage.llm import get_backend

        backend = get_backend(llm) if llm else None
        if backend is not None and hasattr(backend, "probe"):
            backend.probe()
        store = _open_store(db)
        names = [n for n in passes.split(",") if n] or None
        if as_json:
            lid = run_distill(
                problem,
                expert,
                store=store,
                device=device,
                policy=policy,
                max_steps=max_steps,
                regimes=regime,
                config=config,
                pass_names=names,
                llm=backend,
            )
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

                def on_event(kind: str, data: dict[str, Any]) -> None:
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
                        progress.console.print(f"  step {counts['step']:>2} {mark} {data['pass']} {escape(data['site'].split('@')[-1])}"
                                               + ("" if data["accepted"] else f" [dim]{escape(data['message'][:120])}[/]"))  # fmt: skip
                    elif kind == "accepted":
                        counts["accepted"] += 1
                    elif kind == "resume":
                        progress.console.print(
                            f"resuming lineage {data['id']} at step {data['step']}"
                        )

                lid = run_distill(
                    problem,
                    expert,
                    store=store,
                    device=device,
                    policy=policy,
                    max_steps=max_steps,
                    regimes=regime,
                    config=config,
                    pass_names=names,
                    on_event=on_event,
                    llm=backend,
                )
        view = load_view(store, lid)
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(view.as_json(), indent=2))
    else:
        render_lineage(view)
    raise typer.Exit(0 if view.lineage.status == "done" else 1)


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
        table.add_row(lin.id, escape(str(Path(lin.expert_path).relative_to(Path.cwd()) if Path(lin.expert_path).is_relative_to(Path.cwd()) else lin.expert_path)),
                      lin.device, lin.policy, f"{lin.status} ({lin.stop_reason})", str(len(store.nodes(lin.id)) - 1), lin.updated)  # fmt: skip
    console.print(table)


skills_app = typer.Typer(
    help="Skills: lineage steps reversed into optimization records (docs/SKILLS.md).",
    no_args_is_help=True,
)
app.add_typer(skills_app, name="skills")


def _library(db: Path | None, path: Path | None = None) -> tuple[Any, list[Any], str]:
    """The store, and the skills to use with where they came from: --skills FILE, else the
    user's library, else the shipped one."""
    from klineage.skills.library import load_library

    store = _open_store(db)
    skills, label = load_library(store, path)
    return store, skills, label


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
    console.print(f"{len(skills)} skills extracted ({measured} with measured effects): {created} new in the library, {updated} merged into existing ones"
                  + (f"; written to {out}" if out else ""))  # fmt: skip


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
    table = Table(title=f"{len(skills)} skills from {label}", title_justify="left")
    for col in ("id", "skill", "category", "confidence", "measured: pays off on", "sources"):
        table.add_column(col, overflow="fold")
    for s in skills:
        pays = (
            "; ".join(
                c.predicate.removeprefix("pays off (>= 1.05x) on: ")
                for c in s.conditions
                if c.predicate.startswith("pays off")
            )
            or "not measured"
        )
        sources = ", ".join(sorted({Path(p.source_kernel).parent.name for p in s.provenance}))
        table.add_row(
            s.id,
            s.name,
            s.category,
            str(len({p.source_kernel for p in s.provenance})),
            escape(pays[:200]),
            escape(sources),
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
    db: DbOption = None,
) -> None:
    """The library's skills for a target kernel: selected (static conditions hold, measured ones
    predict a gain on some regime) ranked by predicted speedup, then the excluded, each with why."""
    from klineage.skills.retrieve import retrieve

    try:
        _, skills, label = _library(db)
        console.print(f"skills from {escape(label)}")
        results = retrieve(skills, problem, kernel, device=device, capability=capability)
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


def render_run(summary: dict[str, Any]) -> None:
    """The optimize summary: what was applied, per-regime speed, budget used."""
    console.print(
        f"[bold]run {summary['run_id']}[/] ({summary['policy']}, {summary['device']}): {summary['stop_reason']}; "
        f"{summary['gate_calls']}/{summary['budget']} gate calls, {summary['tokens']} LLM tokens, {summary['trials']} trials"
    )
    if summary["applied"]:
        table = Table(title="applied (kept)", title_justify="left")
        for col in ("trial", "what", "how", "effect"):
            table.add_column(col, overflow="fold")
        for a in summary["applied"]:
            eff = (f"{a['speedup']:.2f}x measured" if a.get("speedup") else
                   f"{a['predicted']:.2f}x predicted, not measured" if a.get("predicted") else "")  # fmt: skip
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
            table.add_row(r, f"{v['start_ms']:.4g}", f"{v['best_ms']:.4g}", f"{v['speedup']:.2f}x", f(v["vs_eager"], "{:.2f}x"),
                          f(v["vs_compile"], "{:.2f}x"), f(v["pct_of_floor"], "{:.0f}%"))  # fmt: skip
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
    """  # fmt: skip
    from klineage.llm import get_backend
    from klineage.optimize import OptimizeRefused, Settings
    from klineage.optimize import optimize as run_optimize

    config = GateConfig.from_env().model_copy(update={"timeout_s": timeout})
    try:
        backend = get_backend(llm) if llm else None
        if backend is not None and hasattr(backend, "probe"):
            backend.probe()
        store, lib, label = _library(db, skills)
        if not as_json:
            console.print(f"{len(lib)} skills from {escape(label)}")
        settings = Settings(budget=budget, margin=margin, max_tokens=max_tokens, regimes=regime)
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err_console if as_json else console, transient=True) as progress:  # fmt: skip
            task = progress.add_task("gating the starting kernel", total=budget)

            def on_event(kind: str, data: dict[str, Any]) -> None:
                if kind == "gating":
                    progress.update(
                        task,
                        description=f"trial {data['seq']}: {data['materializer']} {data['label'][:60]}",
                    )
                elif kind == "trial":
                    progress.advance(task, int(data["gated"]))
                    mark = "[green]kept[/]" if data["kept"] else ("[yellow]correct[/]" if data["accepted"] else
                            ("[red]rejected[/]" if data["gated"] else "[dim]n/a[/]"))  # fmt: skip
                    again = " [dim](replayed)[/]" if data["replayed"] else ""
                    progress.console.print(f"  {data['seq']:>3} {mark} {data['materializer']:<10} {escape(data['label'][:70])}{again}"
                                           f" [dim]{escape((data['message'] or '')[:110])}[/]")  # fmt: skip
                elif kind == "resume":
                    progress.console.print(
                        f"resuming run {data['id']} ({data['trials']} trials stored)"
                    )

            summary = run_optimize(problem, kernel, store=store, skills=lib, device=device, policy=policy, settings=settings,
                                   config=config, llm=backend, fresh=fresh, on_event=on_event)  # fmt: skip
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


@app.command()
def bench(
    suite: Annotated[
        str, typer.Option(help="corpus (leave-one-out) or heldout (problems no skill came from).")
    ] = "heldout",
    policies: Annotated[
        str,
        typer.Option(
            help="Comma-separated: klineage, what-only, random, adaexplore, accelopt, llm-feedback."
        ),
    ] = "klineage,what-only,random,adaexplore,accelopt",
    budget: Annotated[int, typer.Option(help="Gate calls per (problem, policy) run.")] = 10,
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
    db: DbOption = None,
) -> None:
    """Every problem of a suite under every policy, same loop, gate and budget: success,
    speedups (over naive, eager, torch.compile), fraction of the expert or floor, gate calls to
    95% of the final best, anytime curves, geomeans. Writes OUT/bench.json after each run.

    The memory baselines learn from `random` rollouts on the corpus; make them first with
    `klineage bench --suite corpus --policies random`. Example:

      klineage bench --suite heldout --device cuda --budget 10 --out bench-runs/h200
    """  # fmt: skip
    from klineage.bench import run_bench
    from klineage.store import default_db_path

    config = GateConfig.from_env().model_copy(update={"profile_compile": compile_ref})
    if quick:
        config = config.model_copy(update={"warmup_ms": 10.0, "rep_ms": 40.0})
    names = [p for p in policies.split(",") if p]
    try:
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

            def on_row(row: dict[str, Any], done: int, total: int) -> None:
                progress.update(task, total=total, completed=done)
                sp = row.get("speedup")
                res = f"{sp:.2f}x" if sp else (row.get("label") or "")
                progress.console.print(f"  {row['problem']:<42} {row['policy']:<12} "
                                       + (f"[red]{escape(row['error'][:100])}[/]" if row.get("error") else f"{res} in {row.get('gate_calls', 0)} gate calls"))  # fmt: skip

            result = run_bench(suite, policies=names, budget=budget, device=device, out=out, db=db or default_db_path(), executor=executor,
                               address=address, workers=workers, per_gpu=per_gpu, problems=[p for p in problems.split(",") if p] or None,
                               regimes=regime, config=config, llm=llm, rollouts_db=rollouts, on_row=on_row)  # fmt: skip
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
    ):
        table.add_column(col)
    f = lambda x, fmt: fmt.format(x) if x is not None else "–"  # noqa: E731
    for p, v in result["summary"].items():
        table.add_row(p, str(v["problems"]), f"{v['success_rate']:.0%}", str(v["improved"]), f(v["geomean_speedup"], "{:.2f}x"),
                      f(v["geomean_vs_eager"], "{:.2f}x"), f(v["geomean_vs_compile"], "{:.2f}x"),
                      f(v["geomean_fraction_of_expert"], "{:.0%}"), f(v["mean_calls_to_95"], "{:.1f}"))  # fmt: skip
    console.print(table)
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
        table.add_row(r.id, escape(str(Path(r.kernel_path).relative_to(Path(r.kernel_path).parents[1]))), r.policy, r.device,
                      r.status, str(sm.get("gate_calls", "")), escape(str(res)))  # fmt: skip
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
        print(json.dumps({"run": asdict(run), "trials": [{k: v for k, v in asdict(t).items() if k != "gate"} for t in trials]},
                         indent=2, default=str))  # fmt: skip
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


@app.command()
def passes(
    source: Annotated[
        Path | None,
        typer.Argument(help="Optional kernel file: list the sites each pass finds in it."),
    ] = None,
) -> None:
    """List the registered rewrite passes (one optimization each); with a kernel file, the sites
    where each optimization is present (backward) or could apply (forward)."""
    from klineage.rewrite import all_passes
    from klineage.rewrite.passes import BROKEN

    registered = all_passes()
    text = source.read_text(encoding="utf-8") if source is not None else None
    table = Table(
        title=f"{len(registered)} rewrite passes" + (f" on {source}" if source else ""),
        title_justify="left",
    )
    for col in (
        "pass",
        "category",
        "anchor",
        "adds" if text is None else "present (backward sites)",
        *(() if text is None else ("could apply (forward)",)),
    ):
        table.add_column(col, overflow="fold")
    for name, p in registered.items():
        if text is None:
            table.add_row(name, p.CATEGORY, escape(p.ANCHOR), escape(p.DESCRIPTION))
        else:
            back = (
                "\n".join(
                    escape(f"{s.function}:{s.line} {s.description}") for s in p.backward_sites(text)
                )
                or "[dim]-[/]"
            )
            fwd = str(len(p.forward_sites(text))) or "0"
            table.add_row(name, p.CATEGORY, escape(p.ANCHOR), back, fwd)
    console.print(table)
    for name, error in BROKEN.items():
        err_console.print(f"[red]pass module {name} failed to import:[/] {escape(error)}")


@app.command()
def version() -> None:
    """Print klineage, torch and triton versions."""
    import torch
    import triton

    console.print(
        f"klineage {__version__}, torch {torch.__version__}, triton {triton.__version__}, python {sys.version.split()[0]}"
    )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
