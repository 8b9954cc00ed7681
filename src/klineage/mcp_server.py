"""klineage as an MCP server (stdio), on the official `mcp` Python SDK (the `mcp` extra).

A coding agent (Claude Code, Codex, Cursor, ...) connects with `klineage mcp` and becomes a
materializer under klineage's gate: it reads the skill cards (what an optimization does and
when it pays off), writes a candidate, and `gate` decides. `optimize` and `distill` run
klineage's own loops under their budgets; `show_run` and `list_runs` read the store.

Every tool returns a JSON object. A failure the caller can fix (a file that is not there, an
unknown policy, no GPU for device cuda) comes back as a tool error naming the file or the
argument; the server keeps serving. Paths are relative to the server's working directory.
The store is the CLI's (`--db`, else $KLINEAGE_DB, else ~/.local/share/klineage/klineage.db),
opened per call: tools run in worker threads, and SQLite connections stay in theirs.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError

from klineage import __version__
from klineage.config import GateConfig
from klineage.errors import KLineageError

INSTRUCTIONS = """\
klineage checks Triton kernels against KernelBench-style problems and knows, from expert \
kernels, when each optimization pays off and when it is unsafe.

- A problem file defines class Model (the PyTorch reference), get_inputs() and optionally \
REGIMES (named input shapes); a candidate file defines class ModelNew that launches Triton kernels.
- gate(problem, candidate) is the verdict: load, static guards, compile, runtime guards, \
correctness on every regime, and on device "cuda" the timing. Only an accepted candidate is \
correct; on "cpu" (the Triton interpreter) nothing is timed.
- retrieve_skills(problem, kernel) lists the optimizations that apply to a kernel, with the \
measured conditions behind each prediction; read a skill's card at skill://ID.
- To optimize by hand: pick a selected skill, write the candidate to a file, gate it, keep it \
only if accepted (and, on cuda, faster). optimize(...) runs klineage's own loop under a \
budget of gate calls; distill(...) walks an expert kernel backward into skills.
- Gate calls take seconds (cpu, small regimes) to minutes. Paths are relative to the \
server's working directory."""

_F = TypeVar("_F", bound=Callable[..., Any])


def _tool_errors(fn: _F) -> _F:
    """A tool's failures as tool errors with klineage's message; never a crash of the server."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except KLineageError as e:
            raise ToolError(f"{type(e).__name__}: {e}") from e
        except Exception as e:  # a bug of ours: say so, keep serving
            raise ToolError(f"internal error in {fn.__name__}: {type(e).__name__}: {e}") from e

    return wrapper  # type: ignore[return-value]


def _file(path: str, what: str) -> Path:
    """An existing file, resolved against the working directory; else a tool error naming it."""
    p = Path(path).expanduser()
    resolved = p if p.is_absolute() else Path.cwd() / p
    if not resolved.is_file():
        why = "is a directory, not a file" if resolved.is_dir() else "not found"
        raise ToolError(
            f"{what} {path!r}: {why} (looked at {resolved}; relative paths are relative to the "
            f"server's working directory {Path.cwd()})"
        )
    return resolved.resolve()


def _config(timeout_s: float, **update: Any) -> GateConfig:
    return GateConfig.from_env().model_copy(update={"timeout_s": timeout_s, **update})


def gate_summary(result: Any) -> dict[str, Any]:
    """A GateResult as the gate tool returns it: the verdict first, then every stage with its
    per-regime outcomes, and on a GPU the per-regime timing."""
    from klineage.gate.records import Fault

    verdict = (
        "accepted"
        if result.accepted
        else ("problem error" if result.fault is Fault.PROBLEM else "rejected")
    )
    env = result.environment
    return {
        "accepted": result.accepted,
        "verdict": verdict,
        "message": result.message,
        "failed_stage": result.failed_stage.value if result.failed_stage else None,
        "fault": result.fault.value if result.fault else None,
        "problem": result.problem,
        "candidate": result.candidate,
        "device": result.device,
        "regimes": result.regimes,
        "overrides": result.overrides,
        "stages": [
            {
                "stage": s.stage.value,
                "status": s.status.value,
                "message": s.message,
                "regimes": [o.model_dump(mode="json", exclude_defaults=True) for o in s.regimes],
            }
            for s in result.stages
        ],
        "timing": {
            r: row.model_dump(mode="json", exclude_defaults=True)
            for r, row in result.profile_rows().items()
        },
        "environment": env.model_dump(mode="json") if env is not None else None,
        "isolation": result.isolation,
        "calls_checked": result.calls_checked,
        "cached": result.cached,
        "timed_out": result.timed_out,
        "seconds": round(result.seconds, 2),
    }


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def build_server(db: Path | None = None) -> MCPServer:
    """The MCP server: its tools and one resource per skill card of the library."""
    from klineage.skills.export import skill_md
    from klineage.skills.library import load_library
    from klineage.store import open_store

    server = MCPServer(
        name="klineage", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    def store() -> Any:
        return open_store(db)

    def library() -> tuple[list[Any], str]:
        return load_library(store())

    @server.tool()
    @_tool_errors
    def gate(
        problem: str,
        candidate: str,
        device: str = "cpu",
        regimes: list[str] | None = None,
        set: dict[str, Any] | None = None,
        timeout_s: float = 120.0,
        base: str | None = None,
    ) -> dict[str, Any]:
        """Gate a candidate kernel against a problem: load, static guards, compile, runtime
        guards, correctness on every regime (>= 5 random trials each), and on device "cuda" the
        timing. Returns accepted, the failed stage and its message, every stage's outcome per
        regime, and on a GPU per-regime timing.

        problem: KernelBench problem file (class Model, get_inputs, optional REGIMES).
        candidate: file with class ModelNew launching Triton kernels.
        device: "cpu" (Triton interpreter: correctness only) or "cuda" (also timed).
        regimes: regime names to check; default the device's set (CPU_REGIMES on cpu).
        set: problem globals to override for a small check, e.g. {"batch_size": 8}.
        timeout_s: seconds the gate may take; a hang past it is a rejection.
        base: on cuda, an accepted kernel for the same problem to time side by side."""
        from klineage.gate import run_gate

        result = run_gate(
            _file(problem, "problem"),
            _file(candidate, "candidate"),
            device=device,
            regimes=list(regimes or []),
            overrides=dict(set or {}),
            config=_config(timeout_s),
            base=_file(base, "base kernel") if base else None,
        )
        return gate_summary(result)

    @server.tool()
    @_tool_errors
    def retrieve_skills(
        problem: str, kernel: str, device: str = "cuda", capability: str | None = "9.0"
    ) -> dict[str, Any]:
        """The library's skills for a target kernel: selected ones (static conditions hold,
        measured conditions predict a gain on some regime) ranked by predicted speedup, then
        the excluded, each with its reasons and conditions. Predictions, not measurements:
        only the gate measures. Each skill's full card is the resource skill://ID.

        problem: the target's problem file (its regimes are what skills are matched to).
        kernel: the target kernel file (ModelNew).
        device: target device, "cuda" or "cpu"; capability: e.g. "9.0" (H100/H200)."""
        from klineage.skills.retrieve import retrieve

        problem_path, kernel_path = _file(problem, "problem"), _file(kernel, "kernel")
        skills, label = library()
        results = retrieve(skills, problem_path, kernel_path, device=device, capability=capability)
        return {
            "library": label,
            "selected": sum(1 for r in results if r.selected),
            "skills": [
                {
                    "id": r.skill.id,
                    "name": r.skill.name,
                    "card": f"skill://{r.skill.id}",
                    "selected": r.selected,
                    "materializer": r.materializer,
                    "sites": r.sites,
                    "score": round(r.score, 4),
                    "predicted": {k: round(v, 4) for k, v in r.predicted.items()},
                    "reasons": r.reasons,
                    "intent": r.skill.intent,
                    "category": r.skill.category,
                    "conditions": [
                        c.model_dump(mode="json", exclude_none=True) for c in r.skill.conditions
                    ],
                }
                for r in results
            ],
        }

    @server.tool()
    @_tool_errors
    def optimize(
        problem: str,
        kernel: str,
        budget: int = 5,
        policy: str = "klineage",
        device: str = "cpu",
        regimes: list[str] | None = None,
        margin: float = 0.03,
        out: str | None = None,
        llm: str | None = None,
        max_tokens: int | None = None,
        set: dict[str, Any] | None = None,
        timeout_s: float = 120.0,
        fresh: bool = False,
    ) -> dict[str, Any]:
        """Optimize a correct starting kernel with skills under a budget of gate calls: retrieve
        the skills whose conditions hold, materialize one at a time (the skill's rewrite where
        its pass finds a site, an LLM otherwise when `llm` is given), gate each, keep it only if
        correct on every regime and (on cuda) faster by `margin`. Stored as a run (show_run);
        the same call again resumes it. Returns the summary and the best kernel's source.

        policy: klineage (when-aware), what-only, random or llm-feedback.
        device: "cpu" (correctness only; gains predicted) or "cuda" (measured).
        out: also write the best kernel to this path.
        llm: openai:MODEL, anthropic:MODEL or openai-compatible:URL:MODEL.
        set: problem globals to override on every gate call, e.g. {"batch_size": 8}."""
        from klineage.llm import connect
        from klineage.optimize import Settings
        from klineage.optimize import optimize as run_optimize
        from klineage.skills.library import load_library as _load

        problem_path, kernel_path = _file(problem, "problem"), _file(kernel, "kernel")
        st = store()
        skills, _ = _load(st)
        settings = Settings(
            budget=budget,
            margin=margin,
            max_tokens=max_tokens,
            regimes=list(regimes or []),
            overrides=dict(set or {}),
        )
        summary = run_optimize(
            problem_path,
            kernel_path,
            store=st,
            skills=skills,
            device=device,
            policy=policy,
            settings=settings,
            config=_config(timeout_s),
            llm=connect(llm) if llm else None,
            fresh=fresh,
        )
        if out:
            Path(out).expanduser().write_text(summary["best_source"], encoding="utf-8")
        return _jsonable(summary)

    @server.tool()
    @_tool_errors
    def distill(
        problem: str,
        expert: str,
        device: str = "cpu",
        policy: str = "least_cost",
        max_steps: int = 50,
        regimes: list[str] | None = None,
        passes: list[str] | None = None,
        set: dict[str, Any] | None = None,
        timeout_s: float = 120.0,
    ) -> dict[str, Any]:
        """Walk an expert kernel backward: remove one optimization per step under the gate,
        until none of the registered ones remains. Stored as a lineage (resumable: the same
        call continues an interrupted walk). Returns the lineage: every attempt with its gate
        verdict, the accepted path, and on cuda each step's measured effect per regime.

        policy: least_cost, most_cost, first or exhaustive. passes: rewrite passes to use.
        set: problem globals to override on every gate call, e.g. {"batch_size": 8}."""
        from klineage.lineage import distill as run_distill
        from klineage.lineage import load_view

        problem_path, expert_path = _file(problem, "problem"), _file(expert, "expert kernel")
        st = store()
        config = _config(timeout_s, profile_compile=False, allow_suspicious=True)
        lid = run_distill(
            problem_path,
            expert_path,
            store=st,
            device=device,
            policy=policy,
            max_steps=max_steps,
            regimes=list(regimes or []),
            config=config,
            pass_names=list(passes) if passes else None,
            overrides=dict(set or {}),
        )
        return _jsonable(load_view(st, lid).as_json())

    @server.tool()
    @_tool_errors
    def show_run(run_id: str) -> dict[str, Any]:
        """One stored optimize run: its settings, status and summary, and every trial (what was
        tried, how it was materialized, the gate's verdict, whether it was kept).

        run_id: a run id or a unique prefix (list_runs shows them)."""
        st = store()
        run = st.get_run(run_id)
        if run is None:
            raise ToolError(f"no optimize run {run_id!r} in {st.path}; list_runs shows them")
        # Kernel sources, LLM replies and whole gate records stay in the store: the trials
        # carry each verdict's stage and message.
        trials = [
            {k: v for k, v in asdict(t).items() if k not in ("gate", "candidate", "reply")}
            for t in st.trials(run.id)
        ]
        row = {k: v for k, v in asdict(run).items() if k != "start_gate"}
        if row.get("summary"):
            row["summary"] = {k: v for k, v in row["summary"].items() if k != "best_source"}
        return _jsonable({"run": row, "trials": trials})

    @server.tool()
    @_tool_errors
    def list_runs() -> dict[str, Any]:
        """Every stored optimize run: id, problem, kernel, policy, device, status, result."""
        runs = store().list_runs()
        return _jsonable(
            {
                "runs": [
                    {
                        "id": r.id,
                        "problem": r.problem_path,
                        "kernel": r.kernel_path,
                        "policy": r.policy,
                        "device": r.device,
                        "status": r.status,
                        "stop_reason": r.stop_reason,
                        "speedup": (r.summary or {}).get("speedup"),
                        "gate_calls": (r.summary or {}).get("gate_calls"),
                    }
                    for r in runs
                ]
            }
        )

    def card(skill_id: str) -> str:
        skills, label = library()
        match = [s for s in skills if s.id.startswith(skill_id)]
        if len(match) != 1:
            raise ResourceNotFoundError(
                f"{len(match)} skills in {label} match {skill_id!r}; resources/list shows them"
            )
        return skill_md(match[0])

    def card_reader(skill_id: str) -> Callable[[], str]:
        def read() -> str:
            return card(skill_id)

        return read

    # One listed resource per card (so a client can browse them), and a template for any id
    # or unique prefix (skills added to the library after the server started included).
    try:
        skills, _ = library()
    except KLineageError:
        skills = []
    from mcp.server.mcpserver.resources import FunctionResource

    for s in skills:
        server.add_resource(
            FunctionResource.from_function(
                card_reader(s.id),
                uri=f"skill://{s.id}",
                name=s.name,
                description=(s.intent.splitlines() or [""])[0][:300],
                mime_type="text/markdown",
            )
        )
    server.resource(
        "skill://{skill_id}",
        name="skill card",
        description="A skill card (SKILL.md): what the optimization does, when it holds, "
        "the measured effects, the failures it avoids, the expert's code.",
        mime_type="text/markdown",
    )(card)
    return server


def serve(db: Path | None = None) -> None:
    """Serve over stdio until the client closes the connection."""
    build_server(db).run("stdio")
