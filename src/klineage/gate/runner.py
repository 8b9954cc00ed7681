"""Run the gate on one candidate: static guards and the verdict cache here, in the parent; the
problem and the candidate each in an isolated process of its own (gate/session.py); the
comparison here, where neither can reach it (gate/checker.py).

The candidate may hang, segfault, exit, flood its reply channel, forge replies, hit an illegal
memory access or run out of memory; each becomes a rejected GateResult naming the stage that
was running. A fault of the problem file is reported as the problem's (fault=problem), never as
the candidate's. The parent never dies of either.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from klineage import __version__
from klineage.config import GateConfig, default_cache_dir
from klineage.errors import LoadError, UsageError
from klineage.gate.cache import GateCache, cache_key
from klineage.gate.records import (
    STAGE_ORDER,
    Environment,
    Fault,
    GateResult,
    Overrides,
    Stage,
    StageResult,
    Status,
)
from klineage.gate.request import EventCallback, GateRequest, failed, passed
from klineage.gate.static_guards import check_static
from klineage.gate.threads import torch_threads
from klineage.problem.loader import check_overrides, parse_source, read_source


@functools.cache
def environment_fingerprint(device: str) -> dict[str, Any]:
    import torch
    import triton

    fp: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "klineage": __version__,
        "python": sys.version.split()[0],
    }
    if device == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(
                "--device cuda: no CUDA GPU is visible to PyTorch here; use --device cpu"
            )
        fp["gpu"] = torch.cuda.get_device_name(0)
    return fp


def assemble(
    req: GateRequest,
    by_stage: dict[Stage, StageResult],
    *,
    environment: Environment | None = None,
    regimes: list[str] | None = None,
    fault: Fault | None = None,
    isolation: str = "",
    calls: int = 0,
    seconds: float = 0.0,
) -> GateResult:
    """The verdict from the stages that ran: accepted only if every required stage passed."""
    stages: list[StageResult] = []
    failed_before = False
    for stage in STAGE_ORDER:
        if stage in by_stage:
            stages.append(by_stage[stage])
            failed_before = failed_before or by_stage[stage].status is Status.FAILED
        else:
            why = "not reached: an earlier stage failed" if failed_before else "not run"
            stages.append(StageResult(stage=stage, status=Status.SKIPPED, message=why))
    must_pass = (Stage.STATIC_GUARDS, Stage.COMPILE, Stage.RUNTIME_GUARDS, Stage.CORRECTNESS)
    accepted = all(
        by_stage.get(s) is not None and by_stage[s].status is Status.PASSED for s in must_pass
    ) and not any(s.status is Status.FAILED for s in stages)
    if not accepted and fault is None:
        fault = Fault.CANDIDATE
    return GateResult(
        problem=req.problem,
        candidate=req.candidate,
        device=req.device,
        regimes=list(regimes or []),
        overrides=dict(req.overrides),
        accepted=accepted,
        stages=stages,
        environment=environment,
        seconds=seconds,
        fault=None if accepted else fault,
        isolation=isolation,
        calls_checked=calls,
    )


def _private_dir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="kl-"))
    os.chmod(d, 0o700)
    return d


def run_gate(
    problem: str | Path,
    candidate: str | Path,
    *,
    device: str = "cpu",
    regimes: list[str] | None = None,
    overrides: Overrides | None = None,
    config: GateConfig | None = None,
    cache_dir: Path | None = None,
    on_event: EventCallback | None = None,
    static_guards: bool = True,
    base: str | Path | None = None,
) -> GateResult:
    """Gate one candidate against one problem. Never raises for anything in the two files;
    raises UsageError for arguments that cannot work (no GPU for --device cuda, an isolation
    level this machine lacks).

    static_guards=False skips the source guards so that tests can show each later layer
    (sandbox, harness, comparison) holding on its own; no command turns them off, and such a
    verdict is never cached.

    base: an accepted kernel for the same problem (a walk's parent, optimize's best so far). On
    a GPU it is timed beside the candidate, so the profile rows carry side-by-side ratios."""
    from klineage.gate.sandbox import strongest_level

    if device not in ("cpu", "cuda"):
        raise UsageError(f"--device {device}: expected cpu or cuda")
    config = config or GateConfig()
    problem_path, candidate_path = Path(problem).resolve(), Path(candidate).resolve()
    base_path = Path(base).resolve() if base is not None and device == "cuda" else None
    req = GateRequest(
        problem=str(problem_path),
        candidate=str(candidate_path),
        device=device,
        regimes=list(regimes or []),
        overrides=dict(overrides or {}),
        config=config,
        base=str(base_path) if base_path is not None else None,
    )
    t0 = time.perf_counter()
    for path, whose in ((problem_path, Fault.PROBLEM), (candidate_path, Fault.CANDIDATE)):
        try:
            parse_source(path, read_source(path))
        except LoadError as e:
            stages = {Stage.LOAD: failed(Stage.LOAD, e.render())}
            return assemble(req, stages, fault=whose, seconds=time.perf_counter() - t0)
    problem_src, candidate_src = read_source(problem_path), read_source(candidate_path)
    check_overrides(problem_path, req.overrides, problem_src)  # a --set name it cannot rebind

    # Static guards first: no cache entry, forged or not, can accept a file that fails them.
    violations = check_static(parse_source(candidate_path, candidate_src)) if static_guards else []
    if violations:
        msg = "; ".join(v.render(candidate_path.name) for v in violations)
        return assemble(
            req,
            {Stage.STATIC_GUARDS: failed(Stage.STATIC_GUARDS, msg)},
            seconds=time.perf_counter() - t0,
        )
    base_src = None
    if base_path is not None:
        try:
            base_src = read_source(base_path)
            base_ok = not check_static(parse_source(base_path, base_src))
        except LoadError:
            base_ok = False
        if not base_ok:  # never timed: the candidate is still gated, without ratios
            req = req.model_copy(update={"base": None})
            base_src = None
    level = strongest_level()
    key = cache_key(
        {
            "problem": problem_src,
            "candidate": candidate_src,
            "regimes": req.regimes,
            "overrides": req.overrides,
            "config": config.model_dump(exclude={"cache", "reference_cache"}),
            "env": environment_fingerprint(device),
            "isolation": str(level),
            "gate": GATE_PROTOCOL,
            "base": base_src,
        }
    )
    cache = GateCache(cache_dir or default_cache_dir()) if config.cache and static_guards else None
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            return hit.model_copy(
                update={"cached": True, "problem": req.problem, "candidate": req.candidate}
            )

    from klineage.gate.drive import drive

    static_ok = passed(
        Stage.STATIC_GUARDS,
        "launches Triton; imports, introspection, try/except, reference use, torch compute in forward, side streams checked"
        if static_guards
        else "NOT RUN (static_guards=False, a test of the later layers)",
    )
    workdir = _private_dir()
    try:
        with torch_threads(device):  # the parent's comparisons, beside other calls' on a GPU host
            result = drive(
                req,
                workdir,
                static_ok,
                on_event,
                secrets.randbits(62),
                (cache_dir or default_cache_dir()) if config.reference_cache else None,
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = result.model_copy(
        update={
            "cache_key": key,
            "seconds": time.perf_counter() - t0,
            "candidate_sha": source_sha(candidate_src),
            "base_sha": source_sha(base_src) if req.base and base_src else None,
        }
    )
    # Not cached: a timeout (it may be the machine's load) and a problem fault (not a verdict).
    if cache is not None and not result.timed_out and result.fault is not Fault.PROBLEM:
        cache.put(key, result)
    return result


def source_sha(source: str) -> str:
    """What a verdict says it checked (GateResult.candidate_sha, .base_sha)."""
    import hashlib

    return hashlib.sha256(source.encode()).hexdigest()


# Bumped when the checks change, so verdicts of older checks are not served.
GATE_PROTOCOL = 15  # 15: tuned kernels also timed with each one's rows chosen apart (profile.apart), that combination checked (mixed.chosen); 14: "suspiciously fast" against the references only near the floor (GateConfig.suspicious_floor_fraction); 5: the reference also evaluated in float64 (RefCase.float64); 6: --set rebinds the assignment, derived globals follow; 7: kernel errors name the candidate's line; 8: verdicts carry candidate_sha and base_sha; 9: autotune tables swept per regime (ProfileRow.configs); 10: regimes name their input shapes; 11: regimes with cases over large_case_bytes get large_trials trials; 12: "suspiciously fast" against the faster of eager and torch.compile; 13: the float64 evaluation keeps float64 through the Model's own casts (gate/upcast.py)


def result_json(result: GateResult) -> str:
    data = result.model_dump(mode="json")
    data["failed_stage"] = result.failed_stage.value if result.failed_stage else None
    data["message"] = result.message
    return json.dumps(data, indent=2)
