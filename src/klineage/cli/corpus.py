"""`klineage corpus liger`: experts from an installed Triton library (klineage/liger.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from klineage.cli.common import app, console, err_console
from klineage.errors import KLineageError

corpus_app = typer.Typer(
    help="Experts from installed Triton libraries, as problem + expert pairs to walk.",
    no_args_is_help=True,
)
app.add_typer(corpus_app, name="corpus")


@corpus_app.command("liger")
def corpus_liger(
    out: Annotated[Path, typer.Option("--out", help="Folder to write the pairs into.")] = Path(
        "liger-corpus"
    ),
    ops: Annotated[
        str,
        typer.Option(
            help="Comma-separated ops (default: all): softmax, layer_norm, rms_norm, swiglu, geglu."
        ),
    ] = "",
) -> None:
    """Liger-Kernel's ops (the installed liger-kernel package, read now, never copied into
    klineage) as OUT/liger_<op>/{problem.py, expert.py, PROVENANCE.json}: the op's module
    unchanged plus a ModelNew calling its Function, beside a reference problem. Walk one with
    `klineage distill`; on the CPU only softmax runs under Triton's interpreter. Example:

      klineage corpus liger --out liger && klineage distill liger/liger_softmax/problem.py liger/liger_softmax/expert.py --device cpu
    """
    from klineage.liger import OPS, write_pairs

    try:
        folders = write_pairs(out, [o for o in ops.split(",") if o] or None)
    except KLineageError as e:
        err_console.print(f"[red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    for f in folders:
        op = f.name.removeprefix("liger_")
        where = "CPU and GPU" if OPS[op].cpu else "GPU only (the interpreter cannot run it)"
        console.print(f"{escape(str(f))}: {where}")
        console.print(
            f"  klineage distill {escape(str(f / 'problem.py'))} {escape(str(f / 'expert.py'))}"
        )
