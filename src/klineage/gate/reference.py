"""The problem's side of the gate: inputs and expected outputs, in a process of their own.

Run isolated as `python -m klineage.gate.reference REQUEST.json OUTDIR`. It imports the problem
file (which is untrusted code too), builds the reference Model per regime, draws the trial
inputs and computes the expected outputs, and writes them to OUTDIR as tensors with a manifest
(gate/protocol.py: RefManifest). It never sees the candidate. A fault of the problem (import,
get_inputs, Model, a non-finite reference) is written to OUTDIR/error.json with the file and
line, and the gate reports it as the problem's fault, not the candidate's.

Beyond get_inputs' own draws, each regime gets cases the candidate cannot predict: the inputs of
an earlier trial changed in place at a few random positions (a cache keyed on a few values or on
the pointer returns a stale result), and value distributions get_inputs never produces (signs
flipped where get_inputs is non-negative, outliers of 32x the largest magnitude, all values 32x larger), kept
only where the reference stays finite on them.

Where a case's outputs are float32, float16 or bfloat16, the reference is evaluated once more in
float64 (a deep copy of the Model with its floating parameters and buffers in float64, the
floating inputs upcast, its own casts to lower floating dtypes undone: gate/upcast.py), and kept beside the expected outputs if it runs and gives finite outputs
of the same structure: PyTorch's own result in the output's dtype is one summation order among
many, not the truth, and the comparison (gate/compare.py) measures a candidate against both.
Where it cannot run (an op without float64, a dtype written into the Model), the case records
why and the comparison uses the tolerance alone: never a fault of the problem.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from klineage.errors import LoadError
from klineage.gate.cases import (
    Seconds,
    _magnitude_ratio,
    _nonfinite,
    _outliers,
    _perturbed,
    _scaled,
    _signed,
    trials_for,
)
from klineage.gate.cases import (
    nbytes as case_nbytes,
)
from klineage.gate.gpulock import Hold, LockByProxy, LockMode
from klineage.gate.protocol import RefCase, RefError, RefManifest, RefRegime, RefRequest
from klineage.problem.loader import error_line_in

CPU_TIMING = "not measured (CPU, Triton interpreter)"
GPU_TIMING = "device time by CUDA-graph replay over rotating input sets (several times the L2), host time by eager launches, side by side with the base; after a GPU spin-up"


def trial_seed(base: int, regime: str, trial: int) -> int:
    h = hashlib.sha256(f"{base}/{regime}/{trial}".encode()).digest()
    return int.from_bytes(h[:4], "little")


def _save(path: Path, **payload: Any) -> str:
    import torch

    torch.save(payload, path)
    return path.name


def _cpu(values: list[Any]) -> list[Any]:
    import torch

    return [v.detach().to("cpu") if isinstance(v, torch.Tensor) else v for v in values]


def _outputs(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


_LOW_DTYPES = ("float32", "float16", "bfloat16")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}".rstrip(": ")


class _Float64:
    """One regime's reference evaluated in float64: the outputs as their difference from the
    expected ones, in float32 (the float64 value to 2^-24 of PyTorch's own error, in half the
    bytes; half-precision outputs keep theirs in their own dtype), or None and why. A failure is remembered: the later cases do not retry it."""

    def __init__(self, model: Any, problem: Any, regime: str) -> None:
        self.model, self.problem, self.regime = model, problem, regime
        self.copy: Any = None
        self.failed: str | None = None

    def outputs(self, inputs: list[Any], want: list[Any]) -> tuple[list[Any] | None, str | None]:
        import torch

        from klineage.gate.upcast import Float64Casts

        low = [isinstance(w, torch.Tensor) and _dtype_name(w.dtype) in _LOW_DTYPES for w in want]
        if not any(low):
            return None, None  # nothing in float32/float16/bfloat16: nothing to evaluate
        if self.failed:
            return None, self.failed
        try:
            if self.copy is None:
                self.copy = copy.deepcopy(self.model).double()
            up = [
                (v.detach().double() if _dtype_name(v.dtype) in _LOW_DTYPES else v.clone())
                if isinstance(v, torch.Tensor)
                else v
                for v in inputs
            ]
            with torch.no_grad(), Float64Casts(), self.problem.regime_globals(self.regime):
                got = _outputs(self.copy(*up))
            deltas = self._deltas(got, want, low)
        except Exception as e:  # a fact about the reference, not a fault of the problem
            self.failed = f"in float64 the reference raised {_first_line(e)}"
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            return None, self.failed
        if isinstance(deltas, str):
            self.failed = deltas
            return None, deltas
        return deltas, None

    @staticmethod
    def _deltas(got: list[Any], want: list[Any], low: list[bool]) -> list[Any] | str:
        import torch

        if len(got) != len(want):
            return f"in float64 the reference returns {len(got)} output(s), not {len(want)}"
        out: list[Any] = []
        for k, (g, w, wanted) in enumerate(zip(got, want, low, strict=True)):
            if not wanted:
                out.append(None)
                continue
            if not isinstance(g, torch.Tensor) or g.dtype != torch.float64 or g.shape != w.shape:
                what = _dtype_name(g.dtype) if isinstance(g, torch.Tensor) else type(g).__name__
                return f"in float64 output {k} of the reference comes back {what}" + (
                    f" of shape {tuple(g.shape)}" if isinstance(g, torch.Tensor) else ""
                )
            if not bool(torch.isfinite(g).all()):
                return f"in float64 output {k} of the reference is not finite"
            # The difference in float32, or in the output's own half precision: there only the
            # plain tolerance against float64 applies, and the difference is a rounding error
            # that half precision holds to 2^-8 of itself (half the bytes of a large regime).
            keep = w.dtype if w.dtype in (torch.float16, torch.bfloat16) else torch.float32
            out.append((g - w.to(g.device).double()).to(keep).cpu())
        return out


def build_regime(
    problem: Any,
    req: RefRequest,
    regime: str,
    out: Path,
    index: int,
    gpu: Hold = contextlib.nullcontext,
) -> tuple[RefRegime, _Baselines | None]:
    """The regime's cases, written to `out`; with `req.time_reference`, its baselines warmed
    up and ready to time. GPU work runs under `gpu()` (the lock shared) a trial at a time, the
    file writes outside it: a call waiting to time is not kept out by GBs of disk writes."""
    import torch

    from klineage.config import GateConfig

    cfg: GateConfig = req.config
    device = req.device
    init = problem.init_inputs(regime)
    torch.manual_seed(cfg.seed)  # the candidate's parameters are made after the same seed
    with gpu(), problem.regime_globals(regime):
        try:
            model = problem.model_cls(*init)
        except Exception as e:
            raise LoadError(
                str(problem.path),
                f"Model(*get_init_inputs()) failed: {type(e).__name__}: {e}",
                line=error_line_in(problem.path, e)[0],
                expected="get_init_inputs to match Model.__init__",
            ) from e
        model = model.to(device).eval()
    tag = str(index)  # file names: init-<regime index>.pt, in-<regime index>-<case index>.pt
    init_file = _save(out / f"init-{tag}.pt", init=_cpu(list(init)))

    def expected(inputs: list[Any]) -> list[Any]:  # on the device
        with torch.no_grad(), problem.regime_globals(regime):
            try:
                value = model(*[v.clone() if isinstance(v, torch.Tensor) else v for v in inputs])
            except Exception as e:
                raise LoadError(
                    str(problem.path),
                    f"the reference Model.forward raised {type(e).__name__}: {e}",
                    line=error_line_in(problem.path, e)[0],
                    expected="a reference that runs on its own inputs",
                ) from e
        return _outputs(value)

    exact = _Float64(model, problem, regime)
    cases: list[RefCase] = []
    skipped: list[str] = []
    trials: list[list[Any]] = []
    first_out: list[Any] = []
    spent = Seconds()
    n_trials, unverified = cfg.trials, False
    t = 0
    while t < n_trials:
        torch.manual_seed(trial_seed(cfg.seed, regime, t))
        with gpu(), spent("cases"):
            inputs = problem.make_inputs(regime, device)
            on_device = expected(inputs)
            want = _cpu(on_device)
        if t == 0:
            n_trials = trials_for(cfg, case_nbytes([*inputs, *want]), skipped)
            # The checker does not verify bf16 on the CPU (the interpreter computes it wrong):
            # one case serves the compile stage, and the rest would be minutes of CPU for
            # nothing (a 268 MB regime's nine cases and their float64 evaluations).
            unverified = device == "cpu" and any(
                isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 for v in inputs
            )
            if unverified:
                n_trials = 1
                skipped.append(
                    "every case but trial 1: bfloat16 inputs are not verified on the CPU"
                )
        bad = _nonfinite(want)
        if bad:
            raise LoadError(
                str(problem.path),
                f"regime {regime}: the reference output has {bad} non-finite element(s) on trial {t + 1} "
                "(a kernel that writes nothing would match NaN)",
                expected="a reference that is finite on get_inputs()",
            )
        trials.append(inputs)
        if not first_out:
            first_out = want
        # Odd trials (and the second) reuse one set of buffers with new contents.
        buffer = "B" if t == 1 or t % 2 == 1 else None
        with gpu(), spent("float64"):
            f64 = (
                (None, "not evaluated: not verified here")
                if unverified
                else exact.outputs(inputs, on_device)
            )
        with spent("files"):
            label = f"trial {t + 1}/{n_trials}"
            case = _case(out, tag, len(cases), label, "get_inputs", inputs, want, buffer, *f64)
        cases.append(case)
        t += 1
    gen = torch.Generator().manual_seed(req.secret ^ trial_seed(cfg.seed, regime, 999))
    base = trials[min(3, len(trials) - 1)]
    variants: list[tuple[str, list[Any] | None, str | None]] = (
        []
        if unverified
        else [
            ("changed in place at random positions", _perturbed(_cpu(base), gen), "B"),
            ("signs flipped (get_inputs is non-negative)", _signed(_cpu(trials[0]), gen), None),
            (
                "outliers of 32x the largest value",
                _outliers(_cpu(trials[2 % len(trials)]), gen),
                "B",
            ),
            ("every value 32x larger", _scaled(_cpu(trials[-1])), None),
        ]
    )
    for label, values, buffer in variants:
        if values is None:
            continue
        with gpu(), spent("cases"):
            values = [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]
            on_device = expected(values)
            want = _cpu(on_device)
        if _nonfinite(want):
            skipped.append(f"{label}: the reference is not finite there")
            continue
        with gpu(), spent("float64"):
            f64 = exact.outputs(values, on_device)
        with spent("files"):
            case = _case(
                out, tag, len(cases), label, "beyond get_inputs", values, want, buffer, *f64
            )
        cases.append(case.model_copy(update={"atol_scale": _magnitude_ratio(want, first_out)}))
    dtypes = [_dtype_name(o.dtype) for o in first_out if isinstance(o, torch.Tensor)]
    has_bf16 = any(isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 for v in trials[0])
    flops = None
    flop_count = getattr(problem.module, "flop_count", None)
    if callable(flop_count):
        flops = float(flop_count(*trials[0]))
    baselines = None
    if req.time_reference:
        with spent("compile"):  # torch.compile's compile: seconds of CPU, so not under the lock
            baselines = _Baselines(model, trials[0], problem, regime, cfg)
    built = RefRegime(
        name=regime,
        init=init_file,
        cases=cases,
        dtype=dtypes[0] if dtypes else None,
        tolerance=problem.tolerances.get(dtypes[0]) if dtypes else None,
        bf16_inputs=has_bf16,
        skipped_variants=skipped,
        nbytes=case_nbytes([*trials[0], *first_out]),
        flops=flops,
        input_shapes=[list(v.shape) if isinstance(v, torch.Tensor) else [] for v in trials[0]],
        input_dtypes=[
            _dtype_name(v.dtype) if isinstance(v, torch.Tensor) else type(v).__name__
            for v in trials[0]
        ],
        seconds=spent.rounded(),
    )
    return built, baselines


def _case(
    out: Path,
    tag: str,
    n: int,
    label: str,
    kind: str,
    inputs: list[Any],
    want: list[Any],
    buffer: str | None,
    float64: list[Any] | None = None,
    float64_missing: str | None = None,
) -> RefCase:
    return RefCase(
        label=label,
        kind=kind,
        buffer=buffer,
        inputs=_save(out / f"in-{tag}-{n}.pt", inputs=_cpu(inputs)),
        expected=_save(out / f"want-{tag}-{n}.pt", outputs=want),
        float64=_save(out / f"f64-{tag}-{n}.pt", deltas=float64) if float64 is not None else None,
        float64_missing=float64_missing,
    )


class _Baselines:
    """Eager PyTorch and torch.compile on one regime, timed as candidates are (gate/devtime.py).

    Made (and torch.compile compiled, by one call) under the shared GPU lock; `time()` runs
    under the exclusive one, right after, before the next regime compiles: a later regime's
    compile (dynamic shapes) would otherwise change the code an earlier regime's calls reach."""

    def __init__(self, model: Any, inputs: list[Any], problem: Any, regime: str, cfg: Any) -> None:
        import torch

        self.model, self.inputs, self.problem, self.regime, self.cfg = (
            model,
            inputs,
            problem,
            regime,
            cfg,
        )
        self.compiled: Any = None
        self.compile_error: str | None = None
        if cfg.profile_compile:
            with torch.no_grad(), problem.regime_globals(regime):
                try:
                    compiled = torch.compile(model)
                    compiled(*inputs)  # compiles: seconds of CPU, none of it timed
                    self.compiled = compiled
                except Exception as e:  # a fact about the baseline, not the candidate
                    self.compile_error = (
                        f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                    )

    def time(self) -> dict[str, Any]:
        """RefRegime's timing fields."""
        import statistics

        import torch

        from klineage.gate.devtime import Timer

        rounds = max(1, self.cfg.timing_rounds) * max(1, self.cfg.timing_samples)

        def bench(fn: Any, name: str) -> dict[str, Any]:
            timer = Timer(fn, self.inputs)
            device, host = timer.device_samples(rounds), timer.host_samples(rounds)
            out: dict[str, Any] = {f"{name}_host_ms": float(statistics.median(host))}
            if device:
                out[f"{name}_ms"] = float(statistics.median(device))
            else:
                out["timing_note"] = (
                    f"{name}: device time not measured (capture failed: {timer.capture_error})"
                )
            return out

        row: dict[str, Any] = {}
        with torch.no_grad(), self.problem.regime_globals(self.regime):
            row.update(bench(self.model, "eager"))
            if self.compile_error:
                row["compile_error"] = self.compile_error
            elif self.compiled is not None:
                try:
                    row.update(bench(self.compiled, "compile"))
                except Exception as e:
                    row["compile_error"] = (
                        f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                    )
        return row


def run(req: RefRequest, out: Path, lock: LockByProxy | None = None) -> RefManifest:
    """Every regime's cases (and, with `req.time_reference`, its baselines' times). `lock` is
    the GPU lock the parent holds for us: shared while a regime's cases are made and its
    torch.compile warms up, exclusive only while it is timed (gate/gpulock.py)."""
    import torch

    from klineage.environment import capture_environment
    from klineage.gate.profile import spin_up_gpu
    from klineage.problem import load_problem

    lock = lock or LockByProxy()
    problem = load_problem(Path(req.problem), req.overrides)
    regimes = problem.select_regimes(req.regimes or None, req.device)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 references are exact fp32
    torch.backends.cudnn.allow_tf32 = False
    t0 = time.perf_counter()
    built: list[RefRegime] = []
    launch_ms = None
    for i, name in enumerate(regimes):
        regime, baselines = build_regime(
            problem, req, name, out, i, gpu=lambda: lock.held(LockMode.SHARED)
        )
        if baselines is not None:
            with lock.held(LockMode.EXCLUSIVE):
                t_time = time.perf_counter()  # the lock's wait is not the reference's
                # Clocks drop while torch.compile compiles on the CPU (an idle H200 reads 345
                # MHz): every regime's timing starts from a busy GPU, not only the first's.
                if req.config.spin_up_ms > 0:
                    spin_up_gpu(req.config.spin_up_ms)
                regime = regime.model_copy(update=baselines.time())
                if launch_ms is None:
                    from klineage.gate.devtime import empty_launch_ms

                    launch_ms = empty_launch_ms()
            timing_s = round(time.perf_counter() - t_time, 3)
            regime = regime.model_copy(update={"seconds": {**regime.seconds, "timing": timing_s}})
            del baselines  # its model, compiled graph and inputs: not held past the regime
        built.append(regime)
    env = capture_environment(req.device, GPU_TIMING if req.device == "cuda" else CPU_TIMING)
    return RefManifest(
        regimes=built, environment=env, launch_ms=launch_ms, seconds=time.perf_counter() - t0
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 4):
        print(
            "usage: python -m klineage.gate.reference REQUEST.json OUTDIR [ASK_FD OK_FD]",
            file=sys.stderr,
        )
        return 2
    # On a GPU the parent passes the two ends of its GPU lock channel (gate/gpulock.py).
    lock = LockByProxy(int(args[2]), int(args[3])) if len(args) == 4 else None
    req = RefRequest.model_validate_json(Path(args[0]).read_text(encoding="utf-8"))
    out = Path(args[1])
    # A --set that contradicts a global computed from another fails inside the problem's code:
    # say which values it ran with, so the error is not read as the file's alone.
    ran_with = (
        f"\n(the problem ran with --set {', '.join(f'{k}={v!r}' for k, v in req.overrides.items())}; "
        "a value that contradicts a global computed from another fails here: set the source "
        "global and let the derived one follow)"
        if req.overrides
        else ""
    )
    try:
        manifest = run(req, out, lock)
    except LoadError as e:
        err = RefError(message=e.render() + ran_with, path=e.path, line=e.line)
        (out / "error.json").write_text(err.model_dump_json(), encoding="utf-8")
        return 3
    except Exception as e:
        line = error_line_in(Path(req.problem), e)[0]
        where = f"{req.problem}:{line}" if line else req.problem
        err = RefError(
            message=f"{where}: {type(e).__name__}: {e}{ran_with}", path=req.problem, line=line
        )
        (out / "error.json").write_text(err.model_dump_json(), encoding="utf-8")
        traceback.print_exc()
        return 3
    (out / "manifest.json").write_text(manifest.model_dump_json(), encoding="utf-8")
    print(json.dumps({"regimes": [r.name for r in manifest.regimes]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
