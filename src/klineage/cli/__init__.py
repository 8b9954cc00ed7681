"""The klineage command line. The only package that prints and exits.

Exit codes: 0 accepted / success, 1 rejected, 2 usage or loading error.

One module per command group, each registering its commands on the shared `app` (common.py):
gate.py (gate, passes, version), demo.py, examples.py, distill.py (distill, lineage), skills.py (skills),
optimize.py (optimize, runs), bench.py (bench, report), mcp.py (mcp), corpus.py (corpus).
"""

from __future__ import annotations

# The command modules register their commands on `app` when imported.
from klineage.cli import (  # noqa: F401
    bench,
    corpus,
    demo,
    distill,
    examples,
    gate,
    mcp,
    optimize,
    skills,
)
from klineage.cli.common import app, console, err_console

__all__ = ["app", "console", "err_console", "main"]

# `klineage --help` lists commands, then groups, in registration order; registration follows
# import order, so the order help shows is set here (a command not listed here comes last).
COMMANDS = (
    "gate",
    "demo",
    "distill",
    "optimize",
    "bench",
    "report",
    "mcp",
    "passes",
    "examples",
    "version",
)
GROUPS = ("lineage", "skills", "runs", "corpus")


def _rank(order: tuple[str, ...], name: str) -> int:
    return order.index(name) if name in order else len(order)


app.registered_commands.sort(
    key=lambda c: _rank(COMMANDS, str(c.name or getattr(c.callback, "__name__", "")))
)
app.registered_groups.sort(key=lambda g: _rank(GROUPS, g.name or ""))


def main() -> None:
    app()
