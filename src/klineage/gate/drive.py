"""One gate call, stage by stage: reference process, candidate harness, checks, timing.

run_gate (gate/runner.py) has already run the static guards and missed the cache; this module
owns the two processes and turns what happens to them into stage results.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from klineage.gate.checker import Checker, load_candidate
from klineage.gate.disk import START_FREE_BYTES, machine_fault, wait_for_disk
from klineage.gate.expected import Expected
from klineage.gate.gpulock import GpuLock, Hold, LockMode
from klineage.gate.protocol import RefManifest, RefRegime, RefRequest
from klineage.gate.records import (
    Fault,
    GateResult,
    RegimeOutcome,
    Stage,
    StageNumbers,
    StageResult,
    Status,
)
from klineage.gate.request import EventCallback, GateRequest, failed, passed
from klineage.gate.session import (
    CandidateDied,
    Clock,
    Harness,
    ProblemFault,
    run_reference,
)


def _split(ref_dir: Path, manifest: RefManifest, workdir: Path) -> tuple[Path, Path]:
    """Inputs to a folder the candidate may read; expected outputs (and the reference's float64
    evaluation) to one only we can."""
    inputs, private = workdir / "inputs", workdir / "private"
    inputs.mkdir()
    private.mkdir(mode=0o700)
    for regime in manifest.regimes:
        shutil.move(str(ref_dir / regime.init), inputs / regime.init)
        for case in regime.cases:
            shutil.move(str(ref_dir / case.inputs), inputs / case.inputs)
            shutil.move(str(ref_dir / case.expected), private / case.expected)
            if case.float64:  # the reference in float64: as private as the expected outputs
                shutil.move(str(ref_dir / case.float64), private / case.float64)
    for p in (inputs, *inputs.iterdir()):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    shutil.rmtree(ref_dir, ignore_errors=True)
    return inputs, private


_LOAD_LABELS = (("cache_put", "cache write"), ("split", "inputs moved"), ("candidate", "import"))


def _load_parts(load_s: dict[str, float]) -> str:
    """The load stage's seconds in words: where a cold call's time went."""
    ref = ", ".join(
        f"{k.removeprefix('reference_')} {v:.1f}"
        for k, v in load_s.items()
        if k.startswith("reference_")
    )
    if "reference" in load_s:
        first = f"reference {load_s['reference']:.1f} s" + (f" ({ref})" if ref else "")
    else:
        first = f"cases from the cache {load_s.get('cached_cases', 0.0):.1f} s"
    rest = [f"{label} {load_s[k]:.1f} s" for k, label in _LOAD_LABELS if k in load_s]
    return "; ".join([first, *rest])


def _reference_cases(req: GateRequest, cache_root: Path | None) -> tuple[Any, str]:
    """The reference's cases (and, on a GPU, its eager and torch.compile times) from an earlier
    call on the same problem, regimes and settings: none of it depends on the candidate."""
    from klineage.gate.cache import cache_key
    from klineage.gate.refcache import ReferenceCache
    from klineage.gate.runner import GATE_PROTOCOL, environment_fingerprint

    if cache_root is None:
        return None, ""
    cfg = req.config
    key = cache_key(
        {
            "problem": Path(req.problem).read_text(encoding="utf-8"),
            "regimes": req.regimes,
            "overrides": req.overrides,
            "device": req.device,
            "seed": cfg.seed,
            "trials": [cfg.trials, cfg.large_trials, cfg.large_case_bytes],
            "timing": [cfg.timing_rounds, cfg.timing_samples],
            "spin_up_ms": cfg.spin_up_ms,
            "profile_compile": cfg.profile_compile,
            "env": environment_fingerprint(req.device),
            "gate": GATE_PROTOCOL,
        }
    )
    return ReferenceCache(cache_root), key


def drive(
    req: GateRequest,
    workdir: Path,
    static_ok: StageResult,
    on_event: EventCallback | None,
    secret: int,
    cache_root: Path | None = None,
) -> GateResult:
    """One gate call after the static guards; cache_root, when given, keeps the reference's
    timings between calls (they do not depend on the candidate)."""
    from klineage.gate.runner import assemble
    from klineage.gate.sandbox import strongest_level

    def event(kind: str, **data: Any) -> None:
        if on_event is not None:
            on_event({"type": kind, **data})

    level = strongest_level()
    stages: dict[Stage, StageResult] = {Stage.STATIC_GUARDS: static_ok}
    event("start", stage=Stage.LOAD.value, detail="reference")
    t_load = time.perf_counter()
    ref_req = RefRequest(
        problem=req.problem,
        device=req.device,
        regimes=req.regimes,
        overrides=req.overrides,
        config=req.config,
        secret=secret,
        time_reference=req.device == "cuda",
    )
    cases, cases_key = _reference_cases(req, cache_root)
    if cases is not None:  # cached cases yield to a live call before it waits for the disk
        cases.make_room(START_FREE_BYTES, workdir, keep=cases_key)
    disk_wait = wait_for_disk(workdir, event) if req.device == "cuda" else 0.0
    cached = cases.get(cases_key, workdir / "ref") if cases is not None else None
    # The problem's time is its own: a slow reference (or torch.compile) is not charged to the
    # candidate, whose clock starts with its own process. run_reference holds the GPU lock for
    # the reference process, shared or exclusive as it asks, and adds the waits to ref_clock.
    ref_clock = Clock(req.config.timeout_s)
    spent: dict[str, float] = {}  # the load stage's wall seconds by part (StageNumbers.load_s)
    t_part = time.perf_counter()
    if cached is not None:
        manifest, ref_dir = cached, workdir / "ref"
        spent["cached_cases"] = time.perf_counter() - t_part
    else:
        try:
            manifest, ref_dir = run_reference(ref_req, workdir, None, ref_clock)
        except ProblemFault as e:
            full = machine_fault(workdir, e.message)
            if full is not None:
                raise full from None
            stages[Stage.LOAD] = failed(Stage.LOAD, f"problem: {e.message}")
            return assemble(req, stages, fault=Fault.PROBLEM, isolation=str(level))
        spent["reference"] = time.perf_counter() - t_part - ref_clock.waited
        for r in manifest.regimes:
            for kind, sec in r.seconds.items():
                spent[f"reference_{kind}"] = spent.get(f"reference_{kind}", 0.0) + sec
        if cases is not None:
            t_part = time.perf_counter()
            cases.put(cases_key, manifest, ref_dir)
            spent["cache_put"] = time.perf_counter() - t_part
    t_part = time.perf_counter()
    inputs, private = _split(ref_dir, manifest, workdir)
    spent["split"] = time.perf_counter() - t_part
    names = [r.name for r in manifest.regimes]
    (workdir / "cand").mkdir()
    clock = Clock(req.config.timeout_s)
    # The GPU, shared with other gate calls: shared for each of the candidate's calls (compile
    # and correctness; not the comparisons after them), exclusive only for timing (gpulock.py).
    lock = GpuLock(clock, active=req.device == "cuda")
    harness = Harness(Path(req.candidate), req.device, workdir / "cand", inputs, clock, None)
    isolation = f"{harness.level}: {harness.description}"
    # The lock shared for each GPU request, not for the comparisons after it.
    checker = Checker(req, harness, Expected(private, manifest), harness.inputs, lock.shared)
    running = Stage.LOAD
    base_harness: Harness | None = None
    base, base_why_not = None, None
    try:
        t_part, waited0 = time.perf_counter(), clock.waited
        bad = load_candidate(harness, req)
        if bad is not None:
            stages[Stage.LOAD] = bad
            return _done(req, stages, manifest, isolation, checker, assemble)
        spent["candidate"] = time.perf_counter() - t_part - (clock.waited - waited0)
        load_s = {k: round(v, 2) for k, v in spent.items()}
        stages[Stage.LOAD] = passed(
            Stage.LOAD,
            f"Model and ModelNew loaded; regimes: {', '.join(names)}; {_load_parts(load_s)}",
            StageNumbers(regime_names=names, load_s=load_s),
        )
        # The reference's work (its cases, and on a GPU its eager and torch.compile timing, when
        # not cached) and the candidate's import: what a cold call costs beyond the candidate's
        # own stages. Waits for the GPU lock and the disk are reported apart (lock_wait_s).
        load_waits = disk_wait + ref_clock.waited + clock.waited
        stages[Stage.LOAD].seconds = max(0.0, time.perf_counter() - t_load - load_waits)
        if req.device == "cuda":  # loaded now, outside the GPU lock, timed after correctness
            base_harness, base, base_why_not = _base_side(req, workdir, inputs)
        running = Stage.COMPILE
        event("start", stage=running.value, detail=names[0])
        compiled, first = checker.compile(manifest.regimes[0])
        stages[compiled.stage] = compiled
        if first is None:
            if checker.seen.violation:
                stages[Stage.RUNTIME_GUARDS] = failed(Stage.RUNTIME_GUARDS, checker.seen.violation)
            return _done(req, stages, manifest, isolation, checker, assemble)
        running = Stage.RUNTIME_GUARDS
        if first.violations:
            stages[running] = failed(running, "; ".join(first.violations))
            return _done(req, stages, manifest, isolation, checker, assemble)
        stages[running] = passed(
            running,
            f"{first.launches} Triton launch(es); no PyTorch compute, host reads, threads or forks seen",
        )
        running = Stage.CORRECTNESS
        event("start", stage=running.value)
        lock.what = "correctness"
        _correctness(req, manifest, checker, stages, event, lock)
        if (
            stages[Stage.CORRECTNESS].status is Status.PASSED
            and req.device == "cuda"
            and not checker.seen.fatal
        ):
            running = Stage.PROFILE
            event("start", stage=running.value)
            lock.what = "profile"
            # Exclusive only while it times (`timing`); the device-kernel listing before it and
            # the graph replay and late calls after it are GPU requests under the shared lock,
            # their comparisons outside it: twelve calls' checks would otherwise queue behind
            # one call's comparisons of GBs of outputs on the host.
            _profile_and_replay(
                req,
                manifest,
                checker,
                stages,
                event,
                inputs,
                base,
                base_why_not,
                timing=lambda: lock.held(LockMode.EXCLUSIVE),
            )
    except CandidateDied as e:
        full = machine_fault(workdir, str(e))
        if full is not None:
            raise full from None
        stages[running] = failed(running, str(e))
        if running is Stage.PROFILE:
            stages.pop(Stage.PROFILE)
            stages[Stage.CORRECTNESS] = failed(Stage.CORRECTNESS, f"after timing: {e}")
    finally:
        lock.close()
        harness.close()
        if base_harness is not None:
            base_harness.close()
    timed_out = harness.timed_out
    if (
        checker.seen.violation
        and stages.get(Stage.RUNTIME_GUARDS, static_ok).status is Status.PASSED
    ):
        stages[Stage.RUNTIME_GUARDS] = failed(Stage.RUNTIME_GUARDS, checker.seen.violation)
    if (
        req.device != "cuda"
        and stages.get(Stage.CORRECTNESS)
        and stages[Stage.CORRECTNESS].status is Status.PASSED
    ):
        stages[Stage.PROFILE] = StageResult(
            stage=Stage.PROFILE,
            status=Status.NOT_MEASURED,
            message="no GPU: timing not measured, and never estimated",
        )
    verdict = _done(req, stages, manifest, isolation, checker, assemble)
    waited = clock.waited + ref_clock.waited + disk_wait
    exclusive = clock.waited_exclusive + ref_clock.waited_exclusive
    return verdict.model_copy(
        update={"timed_out": timed_out, "lock_wait_s": waited, "lock_wait_exclusive_s": exclusive}
    )


def _done(
    req: GateRequest,
    stages: dict[Stage, StageResult],
    manifest: RefManifest,
    isolation: str,
    checker: Checker,
    assemble: Callable[..., GateResult],
) -> GateResult:
    return assemble(
        req,
        stages,
        environment=manifest.environment,
        regimes=[r.name for r in manifest.regimes],
        isolation=isolation,
        calls=checker.seen.calls,
    )


def _correctness(
    req: GateRequest,
    manifest: RefManifest,
    checker: Checker,
    stages: dict[Stage, StageResult],
    event: Callable[..., None],
    lock: GpuLock,
) -> None:
    """The correctness stage; the GPU lock is taken shared for each call of the candidate
    (Checker.hold) and released while its outputs are compared on the host, so a gate call
    waiting to time gets in between (a regime of GBs of outputs, or a candidate checked under
    every config of a large autotune table, compares for many seconds). The stage's `seconds`
    leave the lock waits out."""
    t0, waited0 = time.perf_counter(), lock.clock.waited if lock.clock else 0.0
    before = dict(checker.seen.spent)  # the compile stage's first call is not this stage's
    outcomes: list[RegimeOutcome] = []
    for regime in manifest.regimes:
        event("progress", detail=f"correctness {regime.name}")
        outcomes.append(
            checker.regime(regime).model_copy(
                update={"input_shapes": regime.input_shapes, "input_dtypes": regime.input_dtypes}
            )
        )
        if checker.seen.fatal:
            break
    verified = [o for o in outcomes if o.status is Status.PASSED]
    bad = [o for o in outcomes if o.status is Status.FAILED]
    unverified = [o for o in outcomes if o.status is Status.NOT_MEASURED]
    late = None
    if not bad and verified and not checker.seen.fatal:
        event("progress", detail="late calls")
        late = checker.late_calls(
            [r for r in manifest.regimes if r.name in {o.regime for o in verified}]
        )
    passes = checker.seen.passes
    if bad:
        status, msg = Status.FAILED, "; ".join(f"{o.regime}: {o.message}" for o in bad)
    elif late:
        status, msg = Status.FAILED, late
    elif not verified:
        status, msg = (
            Status.FAILED,
            "no regime could be verified on this device: "
            + "; ".join(f"{o.regime}: {o.message}" for o in unverified),
        )
    else:
        status = Status.PASSED
        msg = f"{len(verified)} regime(s) x {req.config.trials} trials passed, and {checker.seen.calls} calls in all"
        if passes > 1:
            msg += f", under every launchable config of the {passes}-config autotune table"
        if unverified:
            msg += f"; NOT verified here: {', '.join(o.regime for o in unverified)} (bfloat16 on the CPU)"
    if checker.seen.fatal:
        msg += f"; stopped after a fatal device error: {checker.seen.fatal}"
        status = Status.FAILED
    waited = (lock.clock.waited if lock.clock else 0.0) - waited0
    parts = {k: round(v - before.get(k, 0.0), 2) for k, v in checker.seen.spent.items()}
    if parts and status is Status.PASSED:  # a failure's message is its cause
        msg += f" ({_correctness_parts(parts)})"
    stages[Stage.CORRECTNESS] = StageResult(
        stage=Stage.CORRECTNESS,
        status=status,
        message=msg,
        regimes=outcomes,
        seconds=time.perf_counter() - t0 - waited,
        numbers=StageNumbers(correctness_s=parts) if parts else StageNumbers(),
    )


def _correctness_parts(parts: dict[str, float]) -> str:
    """Where the correctness stage's seconds went, for its message: on the reverse cumsum's
    84M-element regimes a call cost about 1 s, and this says whether in the files or the
    compare."""
    harness = parts.get("harness", 0.0)
    shown = [
        f"harness {harness:.1f} s (forward {parts.get('forward', 0.0):.1f} s)",
        *(f"{k} {parts[k]:.1f} s" for k in ("read", "expected", "compare") if k in parts),
    ]
    return ", ".join(shown)


def _base_side(req: GateRequest, workdir: Path, inputs: Path) -> tuple[Any, Any, str | None]:
    """The base's harness, loaded, for side-by-side timing: (harness, side, why not)."""
    from klineage.gate.profile import Side

    if not req.base:
        return None, None, None
    (workdir / "base").mkdir()
    harness = Harness(
        Path(req.base), req.device, workdir / "base", inputs, Clock(req.config.timeout_s), None
    )
    try:
        bad = load_candidate(harness, req, req.base)
    except CandidateDied as e:
        bad = failed(Stage.LOAD, str(e))
    if bad is not None:
        harness.close()
        return None, None, bad.message.splitlines()[0]
    return harness, Side(harness, harness.inputs), None


def _profile_and_replay(
    req: GateRequest,
    manifest: RefManifest,
    checker: Checker,
    stages: dict[Stage, StageResult],
    event: Callable[..., None],
    inputs: Path,
    base: Any,
    why_not: str | None,
    timing: Hold = contextlib.nullcontext,
) -> None:
    """Device kernels, timing (under `timing()`: the GPU lock exclusive), graph replay, late
    calls."""
    from klineage.gate import mixed
    from klineage.gate.profile import Side, profile_stage

    correctness = stages[Stage.CORRECTNESS]
    verified: list[RefRegime] = [
        r
        for r in manifest.regimes
        if any(o.regime == r.name and o.status is Status.PASSED for o in correctness.regimes)
    ]
    for regime in verified:
        event("progress", detail=f"device kernels {regime.name}")
        why = checker.device_kernels(regime)
        if why:
            stages[Stage.RUNTIME_GUARDS] = failed(Stage.RUNTIME_GUARDS, f"{regime.name}: {why}")
            return
    if base is not None:  # the base's clock runs from its first timing, not from its load
        base.harness.clock.start = time.monotonic()
    with timing():
        profiled = profile_stage(
            req,
            verified,
            Side(checker.harness, checker.harness.inputs),
            event,
            base=base,
            launch_ms=manifest.launch_ms,
            table=checker.seen.passes,
            autotuners=dict(checker.seen.autotuners),
        )
    if why_not:
        note = f"; base {req.base} not timed: {why_not}"
        profiled = profiled.model_copy(update={"message": profiled.message + note})
    stages[Stage.PROFILE] = profiled
    for regime in verified:  # kernels' rows the sweep chose apart: checked as each row was
        row = profiled.numbers.regimes.get(regime.name)
        wrong = mixed.chosen(checker, regime, row.config_rows) if row and row.config_rows else None
        if wrong is not None:
            stages[Stage.CORRECTNESS] = failed(Stage.CORRECTNESS, wrong.message)
            return
    for regime in verified:
        event("progress", detail=f"graph replay {regime.name}")
        why = checker.graph_replay(regime)
        if why:
            stages[Stage.CORRECTNESS] = failed(Stage.CORRECTNESS, f"{regime.name}: {why}")
            return
    late = checker.late_calls(verified)
    if late:
        stages[Stage.CORRECTNESS] = failed(Stage.CORRECTNESS, f"after timing: {late}")
        return
    done = stages[Stage.CORRECTNESS]
    note = ""
    if checker.seen.not_replayed:
        note = "; not checked by CUDA-graph replay: " + ", ".join(checker.seen.not_replayed)
    replay = {k: round(v, 2) for k, v in checker.seen.spent.items() if k.startswith("replay")}
    if replay:  # the replay's seconds beside the stage's own (correctness_s)
        note += "; graph replay " + ", ".join(
            f"{k.removeprefix('replay').strip('_') or 'calls'} {v:.1f} s" for k, v in replay.items()
        )
        numbers = done.numbers.model_copy(
            update={"correctness_s": {**(done.numbers.correctness_s or {}), **replay}}
        )
        done = done.model_copy(update={"numbers": numbers})
    stages[Stage.CORRECTNESS] = done.model_copy(update={"message": done.message + note})
