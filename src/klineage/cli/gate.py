"""`klineage gate`, `passes` and `version`: the gate on one candidate, the rewrite passes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from klineage import __version__
from klineage.cli.common import STATUS_STYLE, SetOption, app, console, err_console, parse_set
from klineage.config import GateConfig
from klineage.errors import KLineageError, UsageError
from klineage.gate import GateResult, Stage, run_gate
from klineage.gate.records import Fault
from klineage.gate.request import Event
from klineage.gate.runner import result_json


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


# GateConfig fields set by gate's options, for messages that name the option.
_OPTION_OF = {"trials": "--trials", "timeout_s": "--timeout", "tolerances": "--tol"}


def config_error(e: ValidationError) -> str:
    """One line per invalid setting, naming the option: not pydantic's dump."""
    lines = []
    for err in e.errors():
        field = str(err["loc"][0]) if err["loc"] else ""
        option = _OPTION_OF.get(field, field)
        ctx = err.get("ctx") or {}
        if field == "trials" and "ge" in ctx:
            lines.append(f"--trials {err['input']}: at least {ctx['ge']} random trials per regime")
        elif err["type"] == "value_error":  # a validator's own sentence
            lines.append(f"{option}: {str(err['msg']).removeprefix('Value error, ')}")
        else:
            lines.append(f"{option} {err['input']}: {err['msg']}")
    return "; ".join(lines)


def _events_to_stderr() -> Any:
    """With --json and KLINEAGE_EVENTS=stderr, each stage start and progress event as a JSON
    line on stderr with the seconds since the call began (stdout stays the verdict alone): what
    a script timing many calls reads to see where a slow or cut call spent its time."""
    import os
    import time

    if os.environ.get("KLINEAGE_EVENTS") != "stderr":
        return None
    t0 = time.monotonic()

    def emit(ev: Event) -> None:
        print(
            json.dumps({"t": round(time.monotonic() - t0, 2), **ev}, default=str),
            file=sys.stderr,
            flush=True,
        )

    return emit


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
                shapes = ""
                if o.input_shapes and s.stage is Stage.CORRECTNESS:
                    shapes = " [" + ", ".join(
                        "x".join(map(str, sh)) or "scalar" for sh in o.input_shapes
                    )
                    shapes += f" {o.input_dtypes[0]}]" if o.input_dtypes else "]"
                lines.append(
                    f"{o.regime}{shapes}: {STATUS_STYLE[o.status]} {escape(o.message)}{err}"
                )
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
    if result.isolation:
        level, _, what = result.isolation.partition(": ")
        console.print(
            f"[dim]isolation: {escape(level)} ({escape(what)}); {result.calls_checked} calls checked[/]"
        )
    cached = " (cached)" if result.cached else ""
    if result.accepted:
        verdict = "[bold green]ACCEPTED[/]"
    elif result.fault is Fault.PROBLEM:
        verdict = "[bold yellow]PROBLEM ERROR[/] (the problem file is at fault, not the candidate)"
    else:
        verdict = (
            f"[bold red]REJECTED[/] at {result.failed_stage.value if result.failed_stage else '?'}"
        )
    waited = (
        f" ({result.lock_wait_s:.1f} s of it waiting for the GPU)"
        if result.lock_wait_s >= 0.1
        else ""
    )
    console.print(f"{verdict}{cached} in {result.seconds:.1f} s{waited}")


def _usage_error(message: str, as_json: bool) -> NoReturn:
    """Exit 2 with the message on stderr; with --json also as JSON on stdout, so a program reading
    it gets an answer for a usage error as it does for a verdict."""
    err_console.print(f"[red]error:[/] {escape(message)}")
    if as_json:
        print(json.dumps({"accepted": False, "error": message, "fault": "usage", "exit_code": 2}))
    raise typer.Exit(2)


def _exit_code(result: GateResult) -> int:
    """0 accepted; 1 the candidate was rejected; 2 the problem file is at fault."""
    if result.accepted:
        return 0
    return 2 if result.fault is Fault.PROBLEM else 1


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
    set_: SetOption = [],  # noqa: B006
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
    base: Annotated[
        Path | None,
        typer.Option(
            "--base",
            help="An accepted kernel for the same problem to time beside the candidate (cuda): "
            "each regime then shows the candidate's speedup over it, measured side by side.",
        ),
    ] = None,
    time_basis: Annotated[
        str,
        typer.Option(
            "--time",
            help="What kernel_ms and every decision use: device (CUDA-graph replay, the kernels "
            "alone) or host (eager launches, what a Python caller pays). Both are recorded.",
        ),
    ] = "device",
    configs_per_call: Annotated[
        int,
        typer.Option(
            "--configs-per-call",
            help="A candidate with an @triton.autotune table is a config space: every config "
            "is checked for correctness, and on cuda the first N are each timed per regime "
            "(the fastest then side by side). Env KLINEAGE_CONFIGS_PER_CALL.",
        ),
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check a candidate kernel against a problem: load, static guards, compile, runtime guards,
    correctness on every regime (>= 5 random trials each, every autotune config; against a
    float64 evaluation where the reference's own output is not close enough), and on cuda the
    profile: device time by CUDA-graph replay over rotating inputs, host time beside it, eager
    and torch.compile timed alike, and with --base a side-by-side speedup with its range.
    Regimes of a few microseconds are marked launch-bound: timed, never evidence.

    The candidate runs in a sandbox of its own (bubblewrap where installed), the problem in
    another; outputs are compared outside both. The verdict names the isolation level.

    Exit 0 accepted, 1 the candidate rejected, 2 a usage error or a fault of the problem file.

    Example: klineage gate src/klineage/examples/softmax/problem.py src/klineage/examples/softmax/candidate.py
    """
    try:
        if time_basis not in ("device", "host"):
            raise UsageError(f"--time {time_basis}: expected device or host")
        env_config = GateConfig.from_env()
        tolerances = {**env_config.tolerances, **_parse_tolerances(tol)}
        config = env_config.model_copy(
            update={
                "timeout_s": timeout,
                "trials": trials,
                "allow_suspicious": allow_suspicious,
                "cache": env_config.cache and not no_cache,
                "reference_cache": env_config.reference_cache and not no_cache,
                "time_basis": time_basis,
                "configs_per_call": configs_per_call or env_config.configs_per_call,
            }
        )
        config = GateConfig.model_validate({**config.model_dump(), "tolerances": tolerances})
    except ValidationError as e:
        _usage_error(config_error(e), as_json)
    except (ValueError, KLineageError) as e:
        _usage_error(str(e), as_json)
    overrides = parse_set(set_)
    try:
        if as_json:
            result = run_gate(
                problem,
                candidate,
                device=device,
                regimes=regime,
                overrides=overrides,
                config=config,
                base=base,
                on_event=_events_to_stderr(),
            )
        else:
            with console.status("gate: starting") as status:

                def on_event(ev: Event) -> None:
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
                    base=base,
                )
    except KLineageError as e:
        _usage_error(str(e), as_json)
    if as_json:
        print(result_json(result))
    else:
        render_gate(result)
    raise typer.Exit(_exit_code(result))


@app.command()
def passes(
    source: Annotated[
        Path | None,
        typer.Argument(help="Optional kernel file: list the sites each pass finds in it."),
    ] = None,
) -> None:
    """List the registered rewrite passes (one optimization each); with a kernel file, the sites
    where each optimization is present (backward) or could apply (forward)."""
    from klineage.problem.loader import parse_source, read_source
    from klineage.rewrite import all_passes
    from klineage.rewrite.passes import BROKEN

    registered = all_passes()
    text = None
    if source is not None:
        try:  # a missing file or a syntax error: the file and line, exit 2 (no traceback)
            text = read_source(source)
            parse_source(source, text)
        except KLineageError as e:
            err_console.print(f"[red]error:[/] {escape(str(e))}")
            raise typer.Exit(2) from None
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
