"""What every command module shares: the typer app, the consoles, the --db option and the
store and library helpers. Like the rest of the cli package, only this layer prints and exits.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from klineage.gate import Status
from klineage.gate.records import Overrides

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


SetOption = Annotated[
    list[str],
    typer.Option(
        "--set",
        help="Rebind a module-level assignment of the problem before it runs (repeatable), e.g. "
        "--set batch_size=8; globals computed from it follow.",
    ),
]


def parse_set(items: list[str]) -> Overrides:
    """--set NAME=VALUE items: VALUE as a Python literal (8, 1e-3, (16, 1, 1)), else a string."""
    out: Overrides = {}
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


def _library(db: Path | None, path: Path | None = None) -> tuple[Any, list[Any], str]:
    """The store, and the skills to use with where they came from: --skills FILE, else the
    user's library, else the shipped one."""
    from klineage.skills.library import load_library

    store = _open_store(db)
    skills, label = load_library(store, path)
    return store, skills, label
