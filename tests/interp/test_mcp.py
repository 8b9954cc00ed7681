"""`klineage mcp` through the official MCP SDK's own client over stdio: the tools and the
skill cards a coding agent sees, a correct candidate accepted, a wrong one rejected with its
stage, a missing file a clear tool error after which the server keeps serving."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE

pytest.importorskip("mcp", reason="the `mcp` extra is not installed: pip install -e '.[mcp]'")

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = pytest.mark.interpreter

PROBLEM = EXAMPLE / "problem.py"
CANDIDATE = EXAMPLE / "candidate.py"
# One small regime keeps each CPU gate call to seconds.
REGIMES = ["tiny_rows"]
TOOLS = ("gate", "retrieve_skills", "optimize", "distill", "show_run", "list_runs")


def _session(tmp_path: Path, body: Callable[[ClientSession], Awaitable[None]]) -> None:
    """Start `python -m klineage mcp` as the SDK's stdio client does, and run `body` on it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "klineage", "mcp", "--db", str(tmp_path / "k.db")],
        env={**os.environ, "KLINEAGE_DB": str(tmp_path / "unused.db")},
        cwd=str(tmp_path),
    )

    async def run() -> None:
        async with asyncio.timeout(240):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                await body(s)

    asyncio.run(run())


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    if data is None:  # an older protocol carries the object only as text
        data = json.loads(result.content[0].text)
    return data


def test_mcp_lists_tools_and_serves_skill_cards(tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(TOOLS) <= set(tools)
        gate_args = set(tools["gate"].input_schema["properties"])
        assert {"problem", "candidate", "device", "regimes", "set"} <= gate_args
        assert "budget" in tools["optimize"].input_schema["properties"]

        resources = (await s.list_resources()).resources
        assert resources, "the shipped library's cards are listed"
        first = resources[0]
        assert str(first.uri).startswith("skill://") and first.mime_type == "text/markdown"
        text = (await s.read_resource(str(first.uri))).contents[0].text
        assert text.startswith("---\nname: ") and "## When it holds" in text
        # The template takes a unique prefix of an id too.
        prefix = str(first.uri).removeprefix("skill://")[:6]
        again = (await s.read_resource(f"skill://{prefix}")).contents[0].text
        assert again == text

        target = {"problem": str(PROBLEM), "kernel": str(CANDIDATE)}
        got = _structured(await s.call_tool("retrieve_skills", target))
        assert got["skills"] and got["selected"] >= 1
        for r in got["skills"]:
            assert r["card"] == f"skill://{r['id']}" and r["reasons"] and "conditions" in r
        assert _structured(await s.call_tool("list_runs", {})) == {"runs": []}

    _session(tmp_path, body)


def test_mcp_gate_accepts_rejects_and_names_a_missing_file(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.py"
    source = CANDIDATE.read_text()
    assert "y = num / tl.sum(num, axis=0)" in source
    wrong.write_text(source.replace("/ tl.sum(num, axis=0)", "/ (tl.sum(num, axis=0) + 1.0)"))

    async def body(s: ClientSession) -> None:
        args = {"problem": str(PROBLEM), "regimes": REGIMES}
        ok = _structured(await s.call_tool("gate", {**args, "candidate": str(CANDIDATE)}))
        assert ok["accepted"], ok["message"]
        assert ok["verdict"] == "accepted" and ok["failed_stage"] is None
        correctness = next(st for st in ok["stages"] if st["stage"] == "correctness")
        assert [r["regime"] for r in correctness["regimes"]] == REGIMES
        assert correctness["regimes"][0]["status"] == "passed"

        bad = _structured(await s.call_tool("gate", {**args, "candidate": str(wrong)}))
        assert not bad["accepted"] and bad["verdict"] == "rejected"
        assert bad["failed_stage"] == "correctness" and bad["message"].startswith("correctness: ")

        missing = await s.call_tool("gate", {**args, "candidate": "no_such_kernel.py"})
        assert missing.is_error
        text = missing.content[0].text
        assert "candidate 'no_such_kernel.py': not found" in text and str(tmp_path) in text

        run = await s.call_tool("show_run", {"run_id": "nope"})
        assert run.is_error and "no optimize run 'nope'" in run.content[0].text
        # Still serving after the errors.
        assert len((await s.list_tools()).tools) >= 6

    _session(tmp_path, body)
