"""The gate's child process: load, compile, check and time one candidate.

Run as `python -m klineage.gate.worker REQUEST.json EVENTS.jsonl`. Everything here may meet
hostile code; the parent (runner.py) survives whatever happens to this process, and reads the
events written so far to say which stage was running when it died.
"""

from __future__ import annotations

import hashlib
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from klineage.errors import LoadError
from klineage.gate.records import RegimeOutcome, Stage, StageResult, Status
from klineage.gate.request import EventWriter, GateRequest, failed, passed

CPU_TIMING = "not measured (CPU, Triton interpreter)"
GPU_TIMING = "triton.testing.do_bench median, L2 flushed between runs, after a GPU spin-up"


def trial_seed(base: int, regime: str, trial: int) -> int:
    h = hashlib.sha256(f"{base}/{regime}/{trial}".encode()).digest()
    return int.from_bytes(h[:4], "little")


def short_error(e: BaseException, limit: int = 25) -> str:
    """Type and message; long compiler errors keep their last lines, where the cause is."""
    text = f"{type(e).__name__}: {e}".strip()
    lines = text.splitlines()
    if len(lines) > limit:
        lines = [
            *lines[:3],
            f"... ({len(lines) - limit + 3} lines cut) ...",
            *lines[-(limit - 4) :],
        ]
    return "\n".join(lines)


# Errors for which Triton's autotuner drops a config (times it as infinitely slow) instead of
# failing: a config that cannot launch on this GPU is never picked, so it is skipped, not failed.
AUTOTUNER_SKIPPED_ERRORS = ("OutOfResources", "CompileTimeAssertionFailure", "PTXASError")


def is_autotuner_skip(e: BaseException) -> bool:
    return any(cls.__name__ in AUTOTUNER_SKIPPED_ERRORS for cls in type(e).__mro__)


def is_fatal_device_error(e: BaseException) -> bool:
    """A CUDA error that poisons the context: nothing after it on this process can be trusted."""
    text = str(e)
    return "CUDA error" in text or "illegal memory access" in text or "device-side assert" in text


@dataclass
class RegimeModels:
    reference: Any
    candidate: Any


def build_models(problem: Any, candidate: Any, regime: str, device: str, seed: int) -> RegimeModels:
    import torch

    init = problem.init_inputs(regime)
    # Seeded identically, as KernelBench does, so parameters created in the same order match.
    torch.manual_seed(seed)
    with problem.regime_globals(regime):
        try:
            reference = problem.model_cls(*init)
        except TypeError as e:
            raise LoadError(
                str(problem.path),
                f"Model(*get_init_inputs()) failed: {e}",
                expected="get_init_inputs to match Model.__init__",
            ) from e
        torch.manual_seed(seed)
        cand = candidate.instantiate(init)
    return RegimeModels(reference.to(device).eval(), cand.to(device).eval())


def has_bf16(values: list[Any]) -> bool:
    import torch

    return any(isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 for v in values)


def clone_inputs(values: list[Any]) -> list[Any]:
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def mutated_input(before: list[Any], after: list[Any]) -> int | None:
    from klineage.gate.compare import tensors_equal

    for i, (a, b) in enumerate(zip(before, after, strict=True)):
        if not tensors_equal(a, b):
            return i
    return None


def synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


class Checker:
    """Correctness of one candidate on the selected regimes."""

    def __init__(self, req: GateRequest, problem: Any, candidate: Any, events: EventWriter) -> None:
        self.req = req
        self.problem = problem
        self.candidate = candidate
        self.events = events
        self.cfg = req.config
        self.device = req.device
        self.fatal: str | None = None
        self.guard_violation: str | None = None

    def tolerance(self, dtype: str) -> float:
        declared = self.problem.tolerances.get(dtype)  # the problem's own TOLERANCES
        return declared if declared is not None else self.cfg.tolerance_for(dtype)

    def reference_data(self, regime: str, models: RegimeModels) -> list[tuple[list[Any], Any]]:
        import torch

        data = []
        for t in range(self.cfg.trials):
            torch.manual_seed(trial_seed(self.cfg.seed, regime, t))
            inputs = self.problem.make_inputs(regime, self.device)
            with torch.no_grad(), self.problem.regime_globals(regime):
                want = models.reference(*clone_inputs(inputs))
            data.append((inputs, want))
        return data

    def check_regime(self, regime: str, passes: int) -> RegimeOutcome:
        import torch

        from klineage.gate.compare import as_outputs, compare_outputs, dtype_name, tensors_equal
        from klineage.gate.instrument import STATE, run_observed, runtime_violations

        models = build_models(self.problem, self.candidate, regime, self.device, self.cfg.seed)
        data = self.reference_data(regime, models)
        first_inputs = data[0][0]
        out_dtypes = [
            dtype_name(o.dtype) for o in as_outputs(data[0][1]) if isinstance(o, torch.Tensor)
        ]
        dtype = out_dtypes[0] if out_dtypes else None
        tol = self.tolerance(dtype) if dtype else None
        if self.device == "cpu" and has_bf16(first_inputs):
            return RegimeOutcome(
                regime=regime,
                status=Status.NOT_MEASURED,
                message="not verified: bfloat16 is not computed correctly by the Triton interpreter on the CPU; run on a GPU",
                dtype=dtype,
            )
        # A private copy: trials with odd index write new values into these same buffers.
        buffers = clone_inputs(first_inputs)
        max_abs = max_rel = 0.0
        skipped: list[str] = []
        kernels: set[str] = set()
        for c in range(passes):
            STATE.force_config = c
            STATE.forced.clear()
            prev_out = prev_want = None
            for t, (inputs, want) in enumerate(data):
                label = f"trial {t + 1}/{len(data)}"
                reuse = t < 2 or t % 2 == 1
                if reuse:
                    # The same buffers as the last reused trial, with new values: a kernel that
                    # caches its output by input pointer returns the stale result here.
                    for dst, src in zip(buffers, inputs, strict=True):
                        if isinstance(dst, torch.Tensor):
                            dst.copy_(src)
                    use = buffers
                else:
                    use = inputs
                before = clone_inputs(use)
                try:
                    with self.problem.regime_globals(regime):
                        rec = run_observed(models.candidate, use)
                    synchronize(self.device)
                    kernels.update(rec.kernels)
                except Exception as e:
                    if passes > 1 and is_autotuner_skip(e):
                        forced = "; ".join(f"{k}: {v}" for k, v in STATE.forced.items())
                        skipped.append(f"config {c + 1} ({forced}): {type(e).__name__}")
                        break
                    if is_fatal_device_error(e):
                        self.fatal = short_error(e)
                    return self._fail(
                        regime,
                        dtype,
                        tol,
                        t,
                        c,
                        passes,
                        f"{label}: forward raised {short_error(e)}",
                    )
                violations = runtime_violations(rec)
                if violations:
                    self.guard_violation = f"{label}: " + "; ".join(violations)
                    return self._fail(
                        regime, dtype, tol, t, c, passes, f"runtime guard: {'; '.join(violations)}"
                    )
                k = mutated_input(before, use)
                if k is not None:
                    return self._fail(
                        regime,
                        dtype,
                        tol,
                        t,
                        c,
                        passes,
                        f"{label}: input {k} was modified in place by forward",
                    )
                if (
                    reuse
                    and prev_out is not None
                    and tensors_equal(rec.output, prev_out)
                    and not tensors_equal(want, prev_want)
                ):
                    return self._fail(
                        regime,
                        dtype,
                        tol,
                        t,
                        c,
                        passes,
                        f"{label}: output unchanged although the inputs changed (output cached by input pointer or value?)",
                    )
                cmp = compare_outputs(rec.output, want, self.tolerance)
                if not cmp.ok:
                    return self._fail(regime, dtype, tol, t, c, passes, f"{label}: {cmp.message}")
                max_abs, max_rel = max(max_abs, cmp.max_abs_err), max(max_rel, cmp.max_rel_err)
                if reuse:
                    prev_out = [
                        o.clone() if isinstance(o, torch.Tensor) else o
                        for o in as_outputs(rec.output)
                    ]
                    prev_want = as_outputs(want)
        STATE.force_config = None
        if skipped and len(skipped) == passes:
            return self._fail(
                regime,
                dtype,
                tol,
                0,
                passes - 1,
                passes,
                "no autotune config can launch here: " + "; ".join(skipped),
            )
        msg = f"{len(data)} trials passed"
        if passes > 1:
            msg += f" under each of {passes - len(skipped)} launchable autotune configs"
        if skipped:
            msg += f" (skipped, as the autotuner skips them: {'; '.join(skipped)})"
        return RegimeOutcome(
            regime=regime, status=Status.PASSED, message=msg, trials=len(data), dtype=dtype,
            max_abs_err=max_abs, max_rel_err=max_rel, tolerance=tol, configs_checked=passes - len(skipped),
            kernels=sorted(kernels),
        )  # fmt: skip

    def _fail(
        self,
        regime: str,
        dtype: str | None,
        tol: float | None,
        t: int,
        c: int,
        passes: int,
        msg: str,
    ) -> RegimeOutcome:
        from klineage.gate.instrument import STATE

        if passes > 1 and STATE.forced:
            forced = "; ".join(f"{k}: {v}" for k, v in STATE.forced.items())
            msg = f"autotune config {c + 1}/{passes} ({forced}), {msg}"
        STATE.force_config = None
        return RegimeOutcome(
            regime=regime,
            status=Status.FAILED,
            message=msg,
            trials=t + 1,
            dtype=dtype,
            tolerance=tol,
            configs_checked=c + 1,
        )


def gpu_lock(torch: Any) -> None:
    """Hold an exclusive lock on this process's GPU until it exits (flock on a file named by
    the device's UUID, in $KLINEAGE_GPU_LOCK_DIR or /tmp)."""
    import fcntl
    import os

    try:
        ident = str(torch.cuda.get_device_properties(0).uuid)
    except Exception:  # older torch: the visible-device string names it on one host
        ident = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    d = Path(os.environ.get("KLINEAGE_GPU_LOCK_DIR", "/tmp"))
    fd = os.open(d / f"klineage-gpu-{ident.replace('/', '_')}.lock", os.O_CREAT | os.O_RDWR, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel when this child exits
    _LOCKS.append(fd)


_LOCKS: list[int] = []


def run(req: GateRequest, events: EventWriter) -> None:
    events.start(Stage.LOAD)
    from klineage.problem import load_candidate, load_problem

    try:
        problem = load_problem(Path(req.problem), req.overrides)
        candidate = load_candidate(Path(req.candidate))
        regimes = problem.select_regimes(req.regimes or None, req.device)
    except LoadError as e:
        events.stage(failed(Stage.LOAD, e.render()))
        return
    events.stage(
        passed(
            Stage.LOAD, f"Model and ModelNew loaded; regimes: {', '.join(regimes)}", regimes=regimes
        )
    )

    import torch

    from klineage.environment import capture_environment
    from klineage.gate.instrument import STATE, install_hooks, run_observed, runtime_violations

    events.environment(
        capture_environment(req.device, GPU_TIMING if req.device == "cuda" else CPU_TIMING)
    )
    # fp32 references are exact fp32: TF32 stays off unless a problem opts in itself.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    install_hooks(problem.model_cls)

    # compile: the first call of the first regime, first autotune config.
    events.start(Stage.COMPILE, regimes[0])
    t0 = time.perf_counter()
    try:
        models = build_models(problem, candidate, regimes[0], req.device, req.config.seed)
        torch.manual_seed(trial_seed(req.config.seed, regimes[0], 0))
        inputs = problem.make_inputs(regimes[0], req.device)
        STATE.force_config = 0
        while True:
            try:
                with problem.regime_globals(regimes[0]):
                    record = run_observed(models.candidate, inputs)
                break
            except Exception as e:
                # A config the autotuner would skip (out of shared memory...): try the next.
                if not (is_autotuner_skip(e) and STATE.force_config + 1 < STATE.config_passes):
                    raise
                STATE.force_config += 1
        synchronize(req.device)
    except LoadError as e:
        events.stage(failed(Stage.LOAD, e.render()))
        return
    except Exception as e:
        events.stage(failed(Stage.COMPILE, f"first call on regime {regimes[0]}: {short_error(e)}"))
        return
    finally:
        STATE.force_config = None
    passes = STATE.config_passes
    tuned = ", ".join(
        f"{name} ({STATE.autotuners[k]} configs)" for k, name in STATE.autotuner_names.items()
    )
    events.stage(
        StageResult(
            stage=Stage.COMPILE, status=Status.PASSED, seconds=time.perf_counter() - t0,
            message=f"{record.launches} kernel launch(es) on first call" + (f"; autotuned: {tuned}" if tuned else ""),
            numbers={"launches": record.launches, "autotune_configs": passes},
        )
    )  # fmt: skip

    events.start(Stage.RUNTIME_GUARDS)
    violations = runtime_violations(record)
    if violations:
        events.stage(failed(Stage.RUNTIME_GUARDS, "; ".join(violations)))
        return
    guards_ok = passed(
        Stage.RUNTIME_GUARDS,
        f"{record.launches} Triton launch(es); no PyTorch compute, no reference call",
    )
    events.stage(guards_ok)

    # On a GPU, correctness and timing hold the device alone: gate calls of several workers
    # overlap their process start, imports and compiles, never their GPU work.
    if req.device == "cuda":
        gpu_lock(torch)
    events.start(Stage.CORRECTNESS)
    checker = Checker(req, problem, candidate, events)
    outcomes: list[RegimeOutcome] = []
    t0 = time.perf_counter()
    for regime in regimes:
        events.progress(f"correctness {regime}")
        try:
            outcome = checker.check_regime(regime, passes)
        except LoadError as e:
            outcome = RegimeOutcome(regime=regime, status=Status.FAILED, message=e.render())
        outcomes.append(outcome)
        if checker.fatal:
            break
    if checker.guard_violation:
        events.stage(failed(Stage.RUNTIME_GUARDS, checker.guard_violation))
    verified = [o for o in outcomes if o.status is Status.PASSED]
    bad = [o for o in outcomes if o.status is Status.FAILED]
    unverified = [o for o in outcomes if o.status is Status.NOT_MEASURED]
    if bad:
        status, msg = Status.FAILED, "; ".join(f"{o.regime}: {o.message}" for o in bad)
    elif not verified:
        status, msg = (
            Status.FAILED,
            "no regime could be verified on this device: "
            + "; ".join(f"{o.regime}: {o.message}" for o in unverified),
        )
    else:
        status = Status.PASSED
        msg = f"{len(verified)} regime(s) x {req.config.trials} trials passed"
        if passes > 1:
            msg += f", under every launchable config of the {passes}-config autotune table"
        if unverified:
            msg += f"; NOT verified here: {', '.join(o.regime for o in unverified)} (bfloat16 on the CPU)"
    if checker.fatal:
        msg += f"; stopped after a fatal device error: {checker.fatal}"
    events.stage(
        StageResult(
            stage=Stage.CORRECTNESS,
            status=status,
            message=msg,
            regimes=outcomes,
            seconds=time.perf_counter() - t0,
        )
    )
    if status is not Status.PASSED or checker.fatal:
        return

    if req.device != "cuda":
        events.stage(
            StageResult(
                stage=Stage.PROFILE,
                status=Status.NOT_MEASURED,
                message="no GPU: timing not measured, and never estimated",
            )
        )
        return
    from klineage.gate.profile import profile_regimes

    events.start(Stage.PROFILE)
    events.stage(profile_regimes(req, problem, candidate, [o.regime for o in verified], events))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m klineage.gate.worker REQUEST.json EVENTS.jsonl", file=sys.stderr)
        return 2
    req = GateRequest.model_validate_json(Path(args[0]).read_text(encoding="utf-8"))
    events = EventWriter(Path(args[1]))
    try:
        run(req, events)
    except BaseException:  # reported to the parent, which decides; the child just stops
        traceback.print_exc()
        raise
    events.done()
    return 0


if __name__ == "__main__":
    sys.exit(main())
