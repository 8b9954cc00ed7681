"""`klineage bench`: every (problem, policy) of a suite through the same optimize loop, gate and
budget; per row, success, speedups (over the naive start, eager, torch.compile), fraction of
the expert or of the roofline floor, gate calls to reach 95% of the final best, and the anytime
curve; geomeans per policy. Results are written to OUT/bench.json after every finished job
(nothing is lost when a bench is interrupted; rerunning resumes each optimize run from the
database), with the environment they came from.

Knowledge per policy, so no policy sees the problem it is scored on:
- corpus suite: klineage and what-only get the leave-one-out library (skills merged from the
  other five workloads' lineage steps); the memory baselines get the rollouts of the other
  workloads.
- heldout suite: the full shipped library, and the rollouts of all six corpus workloads.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from klineage.bench.executor import make_executor
from klineage.bench.memory import Memory, build_memory
from klineage.bench.records import SCHEMA, BenchFile, BenchJob, BenchRow
from klineage.bench.suites import (
    BenchProblem,
    label,
    leave_one_out,
    step_skills_path,
    suite_problems,
)
from klineage.bench.summary import summarize
from klineage.config import GateConfig
from klineage.errors import KLineageError, UsageError
from klineage.metrics import calls_to_95, geomean
from klineage.skills import read_json, to_json
from klineage.skills.library import load_library

DEFAULT_POLICIES = ("klineage", "what-only", "random", "adaexplore", "accelopt")
SKILL_POLICIES = ("klineage", "what-only")
# Policies whose proposal order depends on the seed (a shuffled pass order, or the order of what
# a memory does not rank): with --seeds N each runs N times; the others run once.
SEEDED_POLICIES = ("random", "adaexplore", "accelopt")
MEMORY_POLICIES = ("adaexplore", "accelopt")


def run_job(job: BenchJob) -> BenchRow:
    """One optimize run (in a worker process; a GPU is pinned by the executor)."""
    from klineage.gate import run_gate
    from klineage.llm import get_backend
    from klineage.optimize import Settings, optimize
    from klineage.store import open_store

    row: dict[str, Any] = {
        "problem": job.name,
        "policy": job.policy,
        "seed": job.seed,
        "error": None,
    }
    try:
        store = open_store(Path(job.db))
        skills = read_json(Path(job.skills)) if job.skills else []
        memory = Memory.load(Path(job.memory)) if job.memory else None
        config = job.config
        llm = get_backend(job.llm) if job.llm else None
        settings = Settings(
            budget=job.budget, regimes=job.regimes, seed=job.seed, overrides=dict(job.overrides)
        )
        s = optimize(
            job.problem,
            job.naive,
            store=store,
            skills=skills,
            device=job.device,
            policy=job.policy,
            settings=settings,
            config=config,
            llm=llm,
            memory=memory,
        )
    except KLineageError as e:
        row.update(success=False, error=str(e)[:500], gate_calls=0, curve=[], label="")
        return BenchRow.model_validate(row)
    regimes = s["regimes"]
    row.update(
        run_id=s["run_id"],
        success=True,
        label=s["label"],
        speedup=s["speedup"],
        gate_calls=s["gate_calls"],
        curve=[list(x) for x in s["curve"]],
        calls_to_95=calls_to_95(s["curve"]) if s["measured"] else None,
        stop_reason=s["stop_reason"],
        tokens=s["tokens"],
        regimes=regimes,
        vs_eager=geomean([v["vs_eager"] for v in regimes.values()]),
        vs_compile=geomean([v["vs_compile"] for v in regimes.values()]),
        pct_of_floor=geomean([v["pct_of_floor"] for v in regimes.values()]),
        applied=[
            {
                "label": a.get("label") or a["proposal"],
                "materializer": a["materializer"],
                "speedup": a.get("speedup"),
                "predicted": a.get("predicted"),
            }
            for a in s["applied"]
        ],
        environment=s["environment"],
    )
    row["fraction_of_expert"] = None
    if job.expert and job.device == "cuda" and regimes:
        from klineage.lineage.walk import candidate_file, kernel_ms

        g = run_gate(
            job.problem,
            candidate_file(Path(job.expert).read_text(encoding="utf-8")),
            device="cuda",
            regimes=job.regimes or None,
            config=config.model_copy(update={"profile_compile": False, "allow_suspicious": True}),
            overrides=dict(job.overrides) or None,
        )
        ex = kernel_ms(g.model_dump(mode="json")) if g.accepted else {}
        fr = [ex[r] / v["best_ms"] for r, v in regimes.items() if r in ex and v.get("best_ms")]
        row["fraction_of_expert"] = geomean(fr)
        row["expert_ms"] = ex
    return BenchRow.model_validate(row)


def _write(path: Path, bench: BenchFile) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(bench.to_json(), indent=1, default=str), encoding="utf-8")
    tmp.replace(path)


def run_bench(
    suite: str,
    *,
    policies: list[str],
    budget: int,
    device: str,
    out: Path,
    db: Path,
    executor: str = "local",
    address: str | None = None,
    workers: int | None = None,
    per_gpu: int = 1,
    problems: list[str] | None = None,
    regimes: list[str] | None = None,
    config: GateConfig | None = None,
    llm: str | None = None,
    seed: int = 0,
    seeds: int = 1,
    skills_file: Path | None = None,
    rollouts_db: Path | None = None,
    on_row: Callable[[BenchRow, int, int], None] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> BenchFile:
    from klineage.optimize.policies import policy_names

    known = policy_names()
    bad = [p for p in policies if p not in known]
    if bad:
        raise UsageError(f"--policies: unknown {', '.join(bad)}; known: {', '.join(known)}")
    if budget < 1:
        raise UsageError("--budget must be at least 1 gate call")
    if seeds < 1:
        raise UsageError("--seeds must be at least 1")
    probs = suite_problems(suite, problems)
    per_problem, set_notes = suite_overrides(probs, overrides or {})
    out.mkdir(parents=True, exist_ok=True)
    config = config or GateConfig()
    # Knowledge files, written once and read by every job.
    skill_paths: dict[str, str] = {}
    if any(p in SKILL_POLICIES for p in policies):
        if suite == "corpus" and skills_file is None:
            steps = read_json(step_skills_path())
            for bp in probs:
                path = out / f"skills-without-{bp.workload}.json"
                path.write_text(to_json(leave_one_out(steps, bp.workload)), encoding="utf-8")
                skill_paths[bp.workload] = str(path)
        else:
            lib, _ = load_library(None, skills_file)
            path = out / "skills.json"
            path.write_text(to_json(lib), encoding="utf-8")
            skill_paths = {bp.workload: str(path) for bp in probs}
    memory_paths: dict[str, str] = {}
    notes: list[str] = list(set_notes)
    if any(p in MEMORY_POLICIES for p in policies):
        from klineage.store import open_store

        rstore = open_store(rollouts_db or db)
        corpus = {bp.workload for bp in suite_problems("corpus")}
        for bp in probs:
            train = corpus - {bp.workload} if suite == "corpus" else corpus
            mem = build_memory(rstore, train)
            path = (
                out / f"memory-{'without-' + bp.workload if suite == 'corpus' else 'corpus'}.json"
            )
            mem.save(path)
            memory_paths[bp.workload] = str(path)
            if not mem.sources:
                notes.append(
                    "the memory baselines have no rollouts to learn from (run `klineage bench --suite corpus --policies random` first, or pass --rollouts DB); they behave as random"
                )
        rstore.close()
    jobs = [
        _job(
            bp,
            p,
            budget,
            device,
            db,
            regimes or [],
            config,
            llm,
            sd,
            skill_paths,
            memory_paths,
            per_problem.get(bp.name, {}),
        )
        for bp in probs
        for p in policies
        for sd in (range(seed, seed + seeds) if p in SEEDED_POLICIES else [seed])
    ]
    created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    fields: dict[str, Any] = {
        "schema": SCHEMA,
        "id": f"{label(suite)}-{device}-budget{budget}-{created[:16].replace(':', '')}",
        "suite": suite,
        "device": device,
        "budget": budget,
        "policies": policies,
        "seeds": seeds,
        "executor": executor,
        "environment": {},
        "created": created,
        "compile": config.profile_compile,
        "rows": [],
        "summary": {},
        "skills": [],
        "notes": sorted(set(notes)),
    }
    if skill_paths:
        first = next(iter(skill_paths.values()))
        fields["skills"] = (
            json.loads(Path(first).read_text(encoding="utf-8"))["skills"]
            if suite != "corpus"
            else []
        )
    result = BenchFile.model_validate(fields)
    bench_json = out / "bench.json"
    rows: list[BenchRow] = []
    ex = make_executor(executor, device=device, workers=workers, address=address, per_gpu=per_gpu)
    try:
        for row in ex.map(run_job, jobs):
            rows.append(row)
            if row.environment and not result.environment:
                result.environment = row.environment
            result.rows = sorted(
                rows, key=lambda r: (r.problem, policies.index(r.policy), r.seed or 0)
            )
            result.summary = summarize(rows, policies)
            _write(bench_json, result)
            if on_row:
                on_row(row, len(rows), len(jobs))
    finally:
        ex.close()
    return result


def bench_regimes(bp: BenchProblem, device: str) -> list[str]:
    """On a GPU: the regimes sized for it (timed) plus the first CPU regime (ragged sizes that
    catch mask bugs cheaply); on the CPU, the device's default set ([])."""
    from klineage.optimize.decide import cpu_regimes_of, regime_names_of

    if device != "cuda":
        return []
    src = bp.problem.read_text(encoding="utf-8")
    cpu = cpu_regimes_of(src)
    names = regime_names_of(src)
    gpu = [r for r in names if r not in cpu]
    return (cpu[:1] + gpu) if gpu else []


def suite_overrides(
    probs: list[BenchProblem], overrides: Mapping[str, object]
) -> tuple[dict[str, dict[str, object]], list[str]]:
    """--set over a suite: each NAME=VALUE rebinds the problems that assign NAME at module
    level (KernelBench files name their sizes differently); a problem without it keeps its
    own. A name no problem of the suite assigns is a usage error naming the suite's files."""
    from klineage.problem.loader import assignable_globals, parse_source

    if not overrides:
        return {}, []
    names = {bp.name: set(assignable_globals(parse_source(bp.problem))) for bp in probs}
    unused = [k for k in overrides if not any(k in n for n in names.values())]
    if unused:
        raise UsageError(
            f"--set {', '.join(unused)}: no problem of the suite assigns it at module level "
            f"({', '.join(str(bp.problem) for bp in probs[:3])}{', ...' if len(probs) > 3 else ''})"
        )
    per = {n: {k: v for k, v in overrides.items() if k in have} for n, have in names.items()}
    notes = [
        f"--set {k}: not assigned by {', '.join(n for n, have in names.items() if k not in have)} (their own value kept)"
        for k in overrides
        if any(k not in have for have in names.values())
    ]
    return per, notes


def _job(
    bp: BenchProblem,
    policy: str,
    budget: int,
    device: str,
    db: Path,
    regimes: list[str],
    config: GateConfig,
    llm: str | None,
    seed: int,
    skills: dict[str, str],
    memory: dict[str, str],
    overrides: Mapping[str, object] | None = None,
) -> BenchJob:
    regimes = regimes or bench_regimes(bp, device)
    return BenchJob(
        name=bp.name,
        problem=str(bp.problem),
        naive=str(bp.naive),
        expert=str(bp.expert) if bp.expert else None,
        policy=policy,
        budget=budget,
        device=device,
        db=str(db),
        regimes=regimes,
        seed=seed,
        config=config,
        llm=llm,
        skills=skills.get(bp.workload) if policy in SKILL_POLICIES else None,
        memory=memory.get(bp.workload) if policy in MEMORY_POLICIES else None,
        env={k: v for k, v in os.environ.items() if k.startswith("KLINEAGE_")},
        overrides=dict(overrides or {}),
    )
