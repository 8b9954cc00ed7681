"""Run the gate on one candidate: static guards here, everything else in a child process.

The child may hang, segfault, call os._exit, hit an illegal memory access or run out of memory;
each becomes a rejected GateResult that names the stage that was running. The parent never dies
of a candidate.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from klineage import __version__
from klineage.config import GateConfig, default_cache_dir
from klineage.errors import LoadError, UsageError
from klineage.gate.cache import GateCache, cache_key
from klineage.gate.records import STAGE_ORDER, Environment, GateResult, Stage, StageResult, Status
from klineage.gate.request import GateRequest, failed, passed, read_events
from klineage.gate.static_guards import check_static
from klineage.problem.loader import parse_source, read_source

EventCallback = Callable[[dict[str, Any]], None]
# Package root to put on the child's PYTHONPATH, so running from src/ (no install) works too.
_SRC_ROOT = str(Path(__file__).resolve().parents[2])


@functools.cache
def _environment_fingerprint(device: str) -> dict[str, Any]:
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


def _signal_name(code: int) -> str:
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"signal {-code}"
    meaning = {
        signal.SIGSEGV: "segmentation fault",
        signal.SIGABRT: "abort",
        signal.SIGKILL: "killed (out of memory?)",
        signal.SIGBUS: "bus error",
        signal.SIGFPE: "floating-point exception",
    }
    return f"{sig.name} ({meaning.get(sig, 'signal')})"


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _assemble(
    req: GateRequest,
    pre: list[StageResult],
    events: list[dict[str, Any]],
    death: str | None,
    seconds: float,
) -> GateResult:
    by_stage: dict[Stage, StageResult] = {s.stage: s for s in pre}
    env: Environment | None = None
    running: Stage | None = None
    for ev in events:
        if ev["type"] == "start":
            running = Stage(ev["stage"])
        elif ev["type"] == "stage":
            result = StageResult.model_validate(ev["result"])
            by_stage[result.stage] = result
            if running is result.stage:
                running = None
        elif ev["type"] == "environment":
            env = Environment.model_validate(ev["env"])
    if death is not None:
        stage = running or next((s for s in STAGE_ORDER if s not in by_stage), Stage.LOAD)
        by_stage[stage] = failed(stage, death)
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
    regimes: Any = next((s.numbers.get("regimes", []) for s in stages if s.stage is Stage.LOAD), [])
    return GateResult(
        problem=req.problem, candidate=req.candidate, device=req.device, regimes=list(regimes) if isinstance(regimes, list) else [],
        accepted=accepted, stages=stages, environment=env, seconds=seconds,
    )  # fmt: skip


def _spawn(
    req: GateRequest, workdir: Path, on_event: EventCallback | None
) -> tuple[list[dict[str, Any]], str | None]:
    req_path, events_path, log_path = (
        workdir / "request.json",
        workdir / "events.jsonl",
        workdir / "child.log",
    )
    req_path.write_text(req.model_dump_json(), encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC_ROOT, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    if req.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "klineage.gate.worker", str(req_path), str(events_path)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            cwd=str(Path(req.candidate).resolve().parent), start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + req.config.timeout_s
        seen = 0
        timed_out = False
        while proc.poll() is None:
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.05)
            if on_event is not None:
                evs = read_events(events_path)
                for ev in evs[seen:]:
                    on_event(ev)
                seen = len(evs)
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    events = read_events(events_path)
    if on_event is not None:
        for ev in events[seen:]:
            on_event(ev)
    done = any(ev["type"] == "done" for ev in events)
    if timed_out:
        return (
            events,
            f"timed out after {req.config.timeout_s:g} s (infinite loop or hang?); the child process was killed",
        )
    if done:
        return events, None
    rc = proc.returncode
    how = (
        f"killed by {_signal_name(rc)}"
        if rc < 0
        else f"exited with code {rc} before finishing (os._exit or sys.exit in the candidate?)"
    )
    tail = _tail(log_path)
    return events, f"candidate process {how}" + (f"; last output:\n{tail}" if tail else "")


def run_gate(
    problem: str | Path,
    candidate: str | Path,
    *,
    device: str = "cpu",
    regimes: list[str] | None = None,
    overrides: dict[str, Any] | None = None,
    config: GateConfig | None = None,
    cache_dir: Path | None = None,
    on_event: EventCallback | None = None,
) -> GateResult:
    """Gate one candidate against one problem. Never raises for anything in the two files;
    raises UsageError for arguments that cannot work (no GPU for --device cuda)."""
    if device not in ("cpu", "cuda"):
        raise UsageError(f"--device {device}: expected cpu or cuda")
    config = config or GateConfig()
    problem_path, candidate_path = Path(problem).resolve(), Path(candidate).resolve()
    req = GateRequest(
        problem=str(problem_path),
        candidate=str(candidate_path),
        device=device,
        regimes=list(regimes or []),
        overrides=dict(overrides or {}),
        config=config,
    )
    t0 = time.perf_counter()
    pre: list[StageResult] = []
    try:
        problem_src = read_source(problem_path)
        candidate_src = read_source(candidate_path)
        parse_source(problem_path, problem_src)
        tree = parse_source(candidate_path, candidate_src)
    except LoadError as e:
        return _assemble(req, [failed(Stage.LOAD, e.render())], [], None, time.perf_counter() - t0)

    key = cache_key(
        {
            "problem": problem_src, "candidate": candidate_src, "regimes": req.regimes, "overrides": req.overrides,
            "config": config.model_dump(exclude={"timeout_s", "cache"}), "env": _environment_fingerprint(device),
        }
    )  # fmt: skip
    cache = GateCache(cache_dir or default_cache_dir()) if config.cache else None
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            return hit.model_copy(
                update={"cached": True, "problem": req.problem, "candidate": req.candidate}
            )

    violations = check_static(tree)
    if violations:
        pre.append(
            failed(
                Stage.STATIC_GUARDS, "; ".join(v.render(candidate_path.name) for v in violations)
            )
        )
        result = _assemble(req, pre, [], None, time.perf_counter() - t0)
    else:
        pre.append(
            passed(
                Stage.STATIC_GUARDS,
                "launches Triton; no try/except, reference use, torch compute in forward, side streams",
            )
        )
        with tempfile.TemporaryDirectory(prefix="klineage-gate-") as tmp:
            events, death = _spawn(req, Path(tmp), on_event)
        result = _assemble(req, pre, events, death, time.perf_counter() - t0)
        if death is not None and "timed out" in death:
            return result.model_copy(
                update={"cache_key": key}
            )  # a timeout may be the machine's load
    result = result.model_copy(update={"cache_key": key})
    if cache is not None:
        cache.put(key, result)
    return result


def result_json(result: GateResult) -> str:
    data = result.model_dump(mode="json")
    data["failed_stage"] = result.failed_stage.value if result.failed_stage else None
    data["message"] = result.message
    return json.dumps(data, indent=2)
