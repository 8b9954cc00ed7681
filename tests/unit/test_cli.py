"""The command line through typer's CliRunner: help, usage errors and the read-only commands.

No kernel runs here: every invocation fails before the gate, or only reads a database.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.models import CommandInfo
from typer.testing import CliRunner

from klineage import __version__
from klineage.cli import app, console, err_console
from klineage.store import open_store

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "src" / "klineage" / "kernels" / "softmax"
EXAMPLE = ROOT / "src" / "klineage" / "examples" / "softmax"

COMMANDS = [
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
    "lineage",
    "skills",
    "runs",
    "corpus",
]

# Every command and subcommand, with a line of its help (an example or its description).
HELP = {
    ("gate",): "Example: klineage gate src/klineage/examples/softmax/problem.py",
    ("demo",): "The idea end to end on the CPU",
    ("distill",): "klineage distill src/klineage/kernels/softmax/problem.py",
    ("optimize",): "klineage optimize src/klineage/kernels/softmax/problem.py",
    ("bench",): "klineage bench --suite heldout --device cuda",
    ("report",): "A self-contained HTML page of a bench run",
    ("mcp",): '{"mcpServers": {"klineage": {"command": "klineage", "args": ["mcp"]}}}',
    ("passes",): "List the registered rewrite passes",
    ("examples",): "Copy the bundled examples",
    ("version",): "Print klineage, torch and triton versions.",
    ("lineage",): "Show stored lineages.",
    ("lineage", "show"): "Show a stored lineage: its steps",
    ("lineage", "list"): "List stored lineages.",
    ("skills",): "Skills: lineage steps reversed into optimization records",
    ("skills", "extract"): "Reverse every accepted step of the given lineages into skills",
    ("skills", "import"): "Merge a JSON skills file into the library",
    ("skills", "list"): "List the library's skills",
    ("skills", "show"): "Print one skill's card",
    ("skills", "export"): "Export the library (or a JSON file)",
    ("skills", "retrieve"): "The library's skills for a target kernel",
    ("skills", "schema"): "Print (or write) the versioned JSON Schema",
    ("runs",): "Show stored optimize runs and their trials.",
    ("runs", "list"): "Every stored optimize run",
    ("runs", "show"): "One run's trajectory",
    ("corpus",): "Experts from installed Triton libraries",
    ("corpus", "liger"): "Liger-Kernel's ops (the installed liger-kernel package",
}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's database or verdict cache; output is 200 wide.

    typer's help reads COLUMNS when it prints (`invoke` sets it), but the CLI's rich consoles
    fix their width when created if COLUMNS and LINES are both set then, as they are in an
    xdist worker (80x24), so their width is set here.
    """
    monkeypatch.setenv("KLINEAGE_DB", str(tmp_path / "default.db"))
    monkeypatch.setenv("KLINEAGE_CACHE_DIR", str(tmp_path / "cache"))
    for c in (console, err_console):
        monkeypatch.setattr(c, "_width", 200)


def flat(text: str) -> str:
    """Output with rich's wrapping and panel borders removed, whitespace collapsed."""
    return " ".join(text.replace("│", " ").split())


def invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    return result.exit_code, flat(result.output)


def test_help_lists_every_command_in_order() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    panel = result.output.split("Commands")[1]
    # A row of the Commands panel starts with the command's name; continuation lines with blanks.
    listed = [
        line.split()[1] for line in panel.splitlines() if line.startswith("│ ") and line[2] != " "
    ]
    assert listed == COMMANDS


def test_every_command_and_subcommand_is_in_the_help_table() -> None:
    def name(c: CommandInfo) -> str:
        return c.name or str(getattr(c.callback, "__name__", ""))

    registered: set[tuple[str, ...]] = {(name(c),) for c in app.registered_commands}
    for g in app.registered_groups:
        assert g.name is not None and g.typer_instance is not None
        registered.add((g.name,))
        registered |= {(g.name, name(c)) for c in g.typer_instance.registered_commands}
    assert registered == set(HELP)


@pytest.mark.parametrize("path", sorted(HELP), ids=lambda p: "-".join(p))
def test_every_command_help_exits_0_with_its_description(path: tuple[str, ...]) -> None:
    code, out = invoke(*path, "--help")
    assert code == 0, out
    assert f"Usage: klineage {' '.join(path)}" in out
    assert HELP[path] in out


def test_mcp_without_the_sdk_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # As if the `mcp` extra were not installed: the SDK's submodules too, which another test in
    # the same worker may have imported (`from mcp.server... import` finds them directly).
    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")] or ["mcp"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "mcp", None)
    monkeypatch.delitem(sys.modules, "klineage.mcp_server", raising=False)
    code, out = invoke("mcp")
    assert code == 2 and "pip install 'klineage[mcp]'" in out, out


def test_version_prints_the_version() -> None:
    code, out = invoke("version")
    assert code == 0
    assert f"klineage {__version__}" in out
    assert "torch" in out and "triton" in out


def test_optimize_with_a_missing_problem_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_problem.py"
    code, out = invoke("optimize", missing, SOFTMAX / "naive.py", "--db", tmp_path / "k.db")
    assert code == 2
    assert "error:" in out and "no_such_problem.py: file not found" in out


def test_optimize_with_an_unknown_policy(tmp_path: Path) -> None:
    code, out = invoke("optimize", SOFTMAX / "problem.py", SOFTMAX / "naive.py", "--policy", "nope",
                       "--db", tmp_path / "k.db")  # fmt: skip
    assert code == 2
    assert "--policy nope: expected one of" in out and "klineage" in out


def test_optimize_with_a_zero_budget(tmp_path: Path) -> None:
    code, out = invoke("optimize", SOFTMAX / "problem.py", SOFTMAX / "naive.py", "--budget", "0",
                       "--db", tmp_path / "k.db")  # fmt: skip
    assert code == 2
    assert "--budget must be at least 1 gate call" in out


def test_bench_with_an_unknown_policy(tmp_path: Path) -> None:
    code, out = invoke("bench", "--policies", "nope", "--out", tmp_path / "b", "--db", tmp_path / "k.db")  # fmt: skip
    assert code == 2
    assert "--policies: unknown nope" in out


def test_bench_with_an_unknown_suite(tmp_path: Path) -> None:
    code, out = invoke("bench", "--suite", "nope", "--out", tmp_path / "b", "--db", tmp_path / "k.db")  # fmt: skip
    assert code == 2
    assert "--suite nope: expected corpus, heldout, or a folder of problems" in out


def test_report_on_a_missing_path(tmp_path: Path) -> None:
    code, out = invoke("report", tmp_path / "no_bench_here", "--out", tmp_path / "r.html")
    assert code == 2
    assert "no_bench_here: file not found" in out
    assert not (tmp_path / "r.html").exists()


def test_gate_with_a_malformed_set_is_a_usage_error(tmp_path: Path) -> None:
    code, out = invoke("gate", EXAMPLE / "problem.py", EXAMPLE / "candidate.py", "--set", "1x")
    assert code == 2
    assert "'1x': expected NAME=VALUE" in out


def test_runs_show_of_an_unknown_id(tmp_path: Path) -> None:
    code, out = invoke("runs", "show", "abc123", "--db", tmp_path / "k.db")
    assert code == 2
    assert "no optimize run 'abc123'" in out


def test_skills_show_of_an_unknown_id(tmp_path: Path) -> None:
    code, out = invoke("skills", "show", "zzzz", "--db", tmp_path / "k.db")
    assert code == 2
    assert "0 skills in the library match 'zzzz'" in out


def test_skills_list_on_an_empty_database_falls_back_to_the_shipped_library(
    tmp_path: Path,
) -> None:
    code, out = invoke("skills", "list", "--db", tmp_path / "k.db")
    assert code == 0
    assert "skills from the shipped library" in out
    assert "block_size" in out


def _store_a_finished_run(db: Path) -> str:
    rid = "0123456789abcdef"
    store = open_store(db)
    kernel = str(SOFTMAX / "naive.py")
    store.create_run(rid, str(SOFTMAX / "problem.py"), kernel, "p" * 64, "k" * 64, "cpu", "klineage",
                     {"budget": 3})  # fmt: skip
    store.add_trial(rid, 1, "skill:exp2", "exp2_log2e at softmax_kernel:21", "935352ccec0c", "mechanical", "k" * 64,
                    gated=True, accepted=True, kept=True, message="kept: correct on every regime", predicted=1.08)  # fmt: skip
    store.add_trial(rid, 2, "skill:warps", "num_warps at softmax_kernel:30", "6d921c26bbba", "mechanical", "k" * 64,
                    gated=True, accepted=False, message="correctness: max abs err 3e-01")  # fmt: skip
    summary: dict[str, Any] = {
        "run_id": rid, "problem": str(SOFTMAX / "problem.py"), "kernel": kernel, "device": "cpu",
        "policy": "klineage", "llm": None, "stop_reason": "budget of 2 gate calls spent", "measured": False,
        "label": "predicted, not measured", "gate_calls": 2, "budget": 2, "tokens": 0, "trials": 2,
        "applied": [{"seq": 1, "proposal": "skill:exp2", "label": "exp2_log2e at softmax_kernel:21", "materializer": "mechanical",
                     "speedup": None, "predicted": 1.08, "message": "kept: correct on every regime"}],
        "speedup": None, "predicted": 1.08, "regimes": {}, "curve": [], "best_source": "# best\n", "environment": {},
    }  # fmt: skip
    store.update_run(rid, status="done", stop_reason=summary["stop_reason"], summary=summary)
    store.close()
    return rid


def test_runs_list_shows_a_stored_run(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    rid = _store_a_finished_run(db)
    code, out = invoke("runs", "list", "--db", db)
    assert code == 0, out
    assert "1 optimize runs" in out
    assert rid in out and "klineage" in out and "done" in out
    assert "predicted, not measured" in out


def test_runs_show_prints_the_trials_and_the_stop_reason(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    rid = _store_a_finished_run(db)
    code, out = invoke("runs", "show", rid[:8], "--db", db)
    assert code == 0, out
    assert f"run {rid}: done (budget of 2 gate calls spent)" in out
    assert "exp2_log2e at softmax_kernel:21" in out and "num_warps at softmax_kernel:30" in out
    assert "kept" in out and "rejected" in out
    assert "2/2 gate calls" in out  # the stored summary, rendered
    assert "product of predictions 1.08x" in out


def test_runs_show_json(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    rid = _store_a_finished_run(db)
    result = CliRunner().invoke(app, ["runs", "show", rid, "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["run"]["stop_reason"] == "budget of 2 gate calls spent"
    assert [t["label"] for t in data["trials"]] == [
        "exp2_log2e at softmax_kernel:21",
        "num_warps at softmax_kernel:30",
    ]


def test_bench_with_an_unreachable_llm_fails_before_any_run(tmp_path: Path) -> None:
    from tests.chat_server import free_port

    out = tmp_path / "run"
    code, text = invoke("bench", "--problems", "gemv", "--llm", f"openai-compatible:http://127.0.0.1:{free_port()}/v1:m",
                        "--out", out, "--db", tmp_path / "k.db")  # fmt: skip
    assert code == 2 and "cannot reach" in text and "no work was started" in text, text
    assert not (out / "bench.json").exists()


def test_passes_on_a_missing_file_names_it(tmp_path: Path) -> None:
    code, out = invoke("passes", tmp_path / "missing.py")
    assert code == 2
    assert "missing.py: file not found" in out and "Traceback" not in out


def test_passes_on_a_syntax_error_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import triton\n\ndef f(:\n    pass\n")
    code, out = invoke("passes", bad)
    assert code == 2
    assert f"{bad}:3:7: syntax error" in out and "Traceback" not in out


def test_gate_with_too_few_trials_is_one_line(tmp_path: Path) -> None:
    code, out = invoke("gate", EXAMPLE / "problem.py", EXAMPLE / "candidate.py", "--trials", "2")
    assert code == 2
    assert "--trials 2: at least 5 random trials per regime" in out
    assert "validation error" not in out and "pydantic" not in out


@pytest.mark.parametrize("command", ["optimize", "distill"])
def test_optimize_and_distill_take_set(tmp_path: Path, command: str) -> None:
    code, out = invoke(command, EXAMPLE / "problem.py", EXAMPLE / "candidate.py", "--set", "1x",
                       "--db", tmp_path / "k.db")  # fmt: skip
    assert code == 2 and "'1x': expected NAME=VALUE" in out
    code, out = invoke(command, EXAMPLE / "problem.py", EXAMPLE / "candidate.py", "--set", "nope=3",
                       "--db", tmp_path / "k.db")  # fmt: skip
    assert code == 2 and "--set nope: no module-level assignment to nope" in out, out
    assert "assignable globals:" in out


def test_examples_copies_the_bundled_examples(tmp_path: Path) -> None:
    dest = tmp_path / "ex"
    code, out = invoke("examples", dest)
    assert code == 0, out
    for rel in ("softmax/problem.py", "softmax/candidate.py", "logsoftmax/problem.py",
                "kernels/softmax/naive.py", "kernels/rmsnorm/expert.py"):  # fmt: skip
        assert (dest / rel).is_file(), rel
    shipped = ROOT / "src" / "klineage" / "examples" / "softmax" / "candidate.py"
    assert (dest / "softmax" / "candidate.py").read_text() == shipped.read_text()
    assert not list(dest.rglob("__init__.py"))
    code, out = invoke("examples", dest)  # nothing is overwritten without --force
    assert code == 2 and "already exist" in out and "--force" in out
    assert invoke("examples", dest, "--force")[0] == 0


def test_gate_json_answers_a_usage_error_in_json_too() -> None:
    import json

    result = CliRunner().invoke(
        app,
        [
            "gate",
            str(EXAMPLE / "problem.py"),
            str(EXAMPLE / "candidate.py"),
            "--trials",
            "2",
            "--json",
        ],
    )
    assert result.exit_code == 2
    first = next(line for line in result.stdout.splitlines() if line.startswith("{"))
    data = json.loads(first)
    assert data["accepted"] is False and data["fault"] == "usage" and "--trials 2" in data["error"]


def test_gate_json_events_go_to_stderr_only_when_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from klineage.cli.gate import _events_to_stderr

    monkeypatch.delenv("KLINEAGE_EVENTS", raising=False)
    assert _events_to_stderr() is None
    monkeypatch.setenv("KLINEAGE_EVENTS", "stderr")
    emit = _events_to_stderr()
    assert emit is not None
    emit({"type": "start", "stage": "compile", "detail": "tiny"})
    out, err = capsys.readouterr()
    assert out == ""
    event = json.loads(err)
    assert event["stage"] == "compile" and event["t"] >= 0.0
