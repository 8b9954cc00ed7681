"""`klineage examples PATH`: the bundled example problems and kernels, copied where a user who
installed klineage with pip can run the README's commands on them."""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from klineage.cli.common import app, console, err_console


def _files(root: Traversable, rel: Path = Path()) -> list[tuple[Path, Traversable]]:
    """Every .py file under `root` but package markers, as (relative path, resource)."""
    out: list[tuple[Path, Traversable]] = []
    for item in sorted(root.iterdir(), key=lambda t: t.name):
        if item.is_dir():
            if item.name != "__pycache__":
                out += _files(item, rel / item.name)
        elif item.name.endswith(".py") and item.name != "__init__.py":
            out.append((rel / item.name, item))
    return out


def bundled() -> list[tuple[Path, Traversable]]:
    """examples/<name>/... at the top, the expert corpus under kernels/<workload>/..."""
    root = resources.files("klineage")
    return _files(root / "examples") + _files(root / "kernels", Path("kernels"))


@app.command()
def examples(
    path: Annotated[Path, typer.Argument(help="Folder to copy the examples into (created).")],
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite files that are already there.")
    ] = False,
) -> None:
    """Copy the bundled examples (softmax, logsoftmax: problem and candidates) and the expert
    corpus (kernels/<workload>/problem.py, expert.py, naive.py) into PATH, so the README's
    commands run after `pip install klineage`. Example:

      klineage examples kl-examples && klineage gate kl-examples/softmax/problem.py kl-examples/softmax/candidate.py
    """
    files = bundled()
    there = [rel for rel, _ in files if (path / rel).exists()]
    if there and not force:
        shown = ", ".join(str(path / r) for r in there[:3]) + (" ..." if len(there) > 3 else "")
        err_console.print(
            f"[red]error:[/] {escape(shown)} already exist{'s' if len(there) == 1 else ''}; "
            "--force overwrites"
        )
        raise typer.Exit(2)
    try:
        for rel, item in files:
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_bytes(item.read_bytes())
    except OSError as e:
        err_console.print(f"[red]error:[/] cannot write into {escape(str(path))}: {escape(str(e))}")
        raise typer.Exit(2) from None
    console.print(f"{len(files)} files copied into {escape(str(path))}; try:")
    console.print(
        f"  klineage gate {escape(str(path / 'softmax' / 'problem.py'))} "
        f"{escape(str(path / 'softmax' / 'candidate.py'))} --device cpu"
    )
