"""`klineage mcp`: klineage as an MCP server over stdio, for coding agents (docs/MCP.md)."""

from __future__ import annotations

import typer

from klineage.cli.common import DbOption, app, err_console


@app.command()
def mcp(db: DbOption = None) -> None:
    r"""Serve klineage to a coding agent over MCP (stdio): tools gate, retrieve_skills,
    optimize, distill, show_run, list_runs; resources skill://ID (the skill cards).

    Needs the `mcp` extra: pip install 'klineage\[mcp]'. A coding agent starts the server
    itself; put this in its MCP configuration (Claude Code: .mcp.json; Cursor:
    .cursor/mcp.json):

      {"mcpServers": {"klineage": {"command": "klineage", "args": ["mcp"]}}}

    Add "--db", "PATH" to args for another store (default: the CLI's). Paths given to the
    tools are relative to the directory the agent starts the server in; device "cpu" runs
    the Triton interpreter, "cuda" needs a GPU. Stdout carries the protocol: nothing else is
    printed there.
    """
    try:
        from klineage.mcp_server import serve
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("mcp", "mcp_types"):
            err_console.print(
                "[red]error:[/] `klineage mcp` needs the MCP SDK: pip install 'klineage\\[mcp]'"
            )
            raise typer.Exit(2) from None
        raise
    serve(db)
