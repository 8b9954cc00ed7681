"""The gate's checks, run in the parent: what to ask the candidate, and what its answers mean.

The schedule per regime: every case of the reference (get_inputs' trials, some into the same
buffers with new contents, and the cases beyond get_inputs), under each config of every
autotuned kernel seen so far (a kernel first launched in a later regime gets all its configs
checked there). After all regimes, a number of further calls that the candidate cannot know in
advance, drawn per gate call from os.urandom. On a GPU: the device kernels of one forward are
listed (compute kernels that are not the candidate's Triton code are rejected), the forward is
timed, then captured in a CUDA graph and replayed on every case's inputs, and the replayed
outputs are compared too.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.gate import mixed
from klineage.gate.compare import (
    REFERENCE,
    TORCH_ERROR,
    Comparison,
    compare_outputs,
    tensors_equal,
)
from klineage.gate.expected import Expected
from klineage.gate.gpulock import Hold
from klineage.gate.protocol import (
    CallReply,
    Force,
    GraphReply,
    KernelsReply,
    LoadReply,
    RefCase,
    RefRegime,
)
from klineage.gate.records import RegimeOutcome, Stage, StageNumbers, StageResult, Status
from klineage.gate.request import GateRequest, failed, passed
from klineage.gate.session import Harness, load_outputs

# Device kernels a forward may run besides its own Triton kernels: copies, casts and fills
# (PyTorch's names for the kernels behind copy_, .to(), .contiguous(), zeros, fill_).
ALLOWED_DEVICE_KERNELS = re.compile(
    r"memcpy|memset|copy_kernel|CopyKernel|FillFunctor|fill_kernel|direct_copy|"
    r"elementwise_kernel_with_index|unrolled_elementwise_kernel<.*copy|CatArrayBatchedCopy",
    re.IGNORECASE,
)


MAX_BUDGETED_CONFIGS = 64
MEASURED_GRANT_FACTOR = 3.0  # the most _time_for_passes adds, in units of the call's timeout


@dataclass
class Checked:
    """What the candidate did on the calls so far."""

    kernels: set[str] = field(default_factory=set)
    autotuners: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    violation: str | None = None
    fatal: str | None = None
    not_replayed: list[str] = field(default_factory=list)  # regimes whose forward would not capture
    # Wall seconds of the checks by part (StageNumbers.correctness_s): "harness" (a call's round
    # trip: the harness reads the inputs, runs forward, writes the outputs), "forward" (within it,
    # the candidate's forward as the harness timed it), "read" (the outputs read back), "expected"
    # (the reference's outputs, from memory or disk), "compare"; after timing, the CUDA-graph
    # replay's "replay" (its request), "replay_read" (its outputs and the reference's) and
    # "replay_compare"; lock waits left out.
    spent: dict[str, float] = field(default_factory=dict)

    def add(self, part: str, seconds: float) -> None:
        self.spent[part] = self.spent.get(part, 0.0) + seconds

    @property
    def passes(self) -> int:
        return max(self.autotuners.values(), default=1)


class Checker:
    def __init__(
        self,
        req: GateRequest,
        harness: Harness,
        expected: Expected,
        inputs: Path,
        hold: Hold = contextlib.nullcontext,
    ) -> None:
        self.req = req
        self.cfg = req.config
        self.harness = harness
        self.expected = expected
        self.inputs = inputs
        self.seen = Checked()
        self._budgeted = 1  # autotune configs the candidate's clock has time for
        self._measured_grant = 0.0  # seconds added for later configs' passes over regimes
        # Held around each request to the harness (the GPU work), not around the comparisons
        # after it: on a GPU, the gate's lock taken shared (GpuLock.shared).
        self.hold = hold

    def _time_for_configs(self) -> None:
        """An autotune table is a config space: every config is compiled and checked (and on a
        GPU timed), so the call's clock grows by timeout_per_config_s for each config beyond
        the first, up to MAX_BUDGETED_CONFIGS. A 16-config table is 16 kernels to build, not a
        hang."""
        grown = min(self.seen.passes, MAX_BUDGETED_CONFIGS) - self._budgeted
        if grown > 0:
            self.harness.clock.timeout_s += grown * self.cfg.timeout_per_config_s
            self._budgeted += grown

    def _time_for_passes(self, first_pass_s: float, passes: int) -> None:
        """Every config runs the regime's cases again, so a regime whose first config's pass
        took t seconds needs (configs - 1) x t more: the clock grows by that, on top of the
        flat per-config allowance (compiling), up to MEASURED_GRANT_FACTOR x the call's own
        timeout in all. A 16-config table over three 84M-element regimes is 16 passes of
        seconds each, not a hang; a candidate slow on purpose buys a bounded wait at most."""
        cap = MEASURED_GRANT_FACTOR * self.cfg.timeout_s - self._measured_grant
        grant = min((min(passes, MAX_BUDGETED_CONFIGS) - 1) * first_pass_s, cap)
        if grant > 0:
            self.harness.clock.timeout_s += grant
            self._measured_grant += grant

    def tolerance_for(self, regime: RefRegime) -> Callable[[str], float]:
        def tol(dtype: str) -> float:
            if regime.tolerance is not None and dtype == regime.dtype:
                return regime.tolerance
            return self.cfg.tolerance_for(dtype)

        return tol

    def call(
        self, regime: RefRegime, case: RefCase, force: Force, *, locked: bool = True
    ) -> tuple[CallReply, list[Any] | None]:
        n = self.seen.calls
        out = self.harness.out / f"call-{n}.pt"
        # The GPU work under the lock; reading the outputs back is not. The compile stage's
        # first call is not either (locked=False): seconds of Triton compiling on the host, then
        # one forward on the first (smallest) regime.
        with self.hold() if locked else contextlib.nullcontext():
            t0 = time.perf_counter()
            reply = self.harness.request(
                {
                    "op": "call",
                    "regime": regime.name,
                    "init": str(self.inputs / regime.init),
                    "inputs": str(self.inputs / case.inputs),
                    "buffer": case.buffer,
                    "force_config": force,
                    "out": str(out),
                },
                CallReply,
            )
            self.seen.add("harness", time.perf_counter() - t0)
            self.seen.add("forward", reply.seconds or 0.0)
        self.seen.calls += 1
        for name, k in reply.autotuners.items():
            self.seen.autotuners[name] = max(self.seen.autotuners.get(name, 0), k)
        self._time_for_configs()
        if not reply.ok:
            return reply, None
        self.seen.kernels.update(reply.kernels)
        t0 = time.perf_counter()
        outs = load_outputs(out)
        out.unlink(missing_ok=True)
        self.seen.add("read", time.perf_counter() - t0)
        return reply, outs

    def compare(
        self, got: list[Any], want: list[Any], tol: Callable[[str], float], case: RefCase
    ) -> Comparison:
        """One call's outputs against the reference's (a single output compared as itself), and
        against its float64 evaluation where the reference's own tolerance is not met. On a GPU
        the common case of a large output is checked there (compare.DEVICE_MIN), under the
        gate's lock taken shared like a call: a gate call timing waits for it, milliseconds
        where the host took a second or more."""
        on_gpu = self.req.device == "cuda"
        with self.hold() if on_gpu else contextlib.nullcontext():
            return compare_outputs(
                got if len(got) != 1 else got[0],
                want if len(want) != 1 else want[0],
                tol,
                case.atol_scale,
                (lambda: self.expected.float64(case)) if case.float64 else None,
                case.float64_missing,
                device="cuda" if on_gpu else None,
            )

    # compile --------------------------------------------------------------------------------
    def compile(self, regime: RefRegime) -> tuple[StageResult, CallReply | None]:
        t0 = time.perf_counter()
        force = 0
        while True:
            reply, _ = self.call(regime, regime.cases[0], force, locked=False)
            if reply.ok or not (reply.skip and force + 1 < self.seen.passes):
                break
            force += 1  # a config the autotuner would skip (out of shared memory...): the next
        if reply.init_error:
            where = f"{self.req.candidate}:{reply.line}" if reply.line else self.req.candidate
            return failed(
                Stage.LOAD, f"{where}: {reply.init_error}\nexpected: {reply.expected}"
            ), None
        if not reply.ok and reply.violations:
            # The call died because a guard refused something (a thread start): it compiled.
            self.seen.violation = "; ".join(reply.violations)
            return passed(
                Stage.COMPILE, f"first call on regime {regime.name} stopped by a runtime guard"
            ), None
        if not reply.ok:
            return failed(
                Stage.COMPILE,
                f"{self.where(reply)}first call on regime {regime.name}: {reply.error}"
                + self.source(reply),
            ), None
        tuned = ", ".join(f"{k} ({v} configs)" for k, v in self.seen.autotuners.items())
        return StageResult(
            stage=Stage.COMPILE,
            status=Status.PASSED,
            seconds=time.perf_counter() - t0,
            message=f"{reply.launches} kernel launch(es) on first call"
            + (f"; autotuned: {tuned}" if tuned else ""),
            numbers=StageNumbers(launches=reply.launches, autotune_configs=self.seen.passes),
        ), reply

    def _guarded(
        self, regime: RefRegime, case: RefCase, c: int, passes: int, reply: CallReply
    ) -> RegimeOutcome:
        """The regime fails for what a runtime guard saw on this call (and the verdict says so)."""
        self.seen.violation = f"{case.label}: " + "; ".join(reply.violations)
        return self._fail(
            regime, case, c, passes, reply, f"runtime guard: {'; '.join(reply.violations)}"
        )

    def where(self, reply: CallReply) -> str:
        """'candidate.py:15: ' where the candidate's error was raised in its own file."""
        return f"{Path(self.req.candidate).name}:{reply.line}: " if reply.line else ""

    @staticmethod
    def source(reply: CallReply) -> str:
        return f"\n    {reply.source_line.strip()}" if reply.source_line else ""

    # correctness ----------------------------------------------------------------------------
    def regime(self, regime: RefRegime) -> RegimeOutcome:
        if self.req.device == "cpu" and regime.bf16_inputs:
            return RegimeOutcome(
                regime=regime.name,
                status=Status.NOT_MEASURED,
                dtype=regime.dtype,
                message="not verified: bfloat16 is not computed correctly by the Triton interpreter on the CPU; run on a GPU",
            )
        tol = self.tolerance_for(regime)
        max_abs = max_rel = 0.0
        by_float64: dict[str, Comparison] = {}  # case label -> a pass by a float64 criterion
        skipped: list[str] = []
        kernels: set[str] = set()
        c = 0
        passes = self.seen.passes
        started = time.perf_counter()
        while c < passes:
            previous: tuple[list[Any], list[Any]] | None = None
            for case in regime.cases:
                reply, got = self.call(regime, case, c)
                if not reply.ok or got is None:
                    if passes > 1 and reply.skip:
                        forced = "; ".join(f"{k}: {v}" for k, v in reply.forced.items())
                        skipped.append(
                            f"config {c + 1} ({forced}): {(reply.error or '').split(':')[0]}"
                        )
                        break
                    if reply.violations:
                        return self._guarded(regime, case, c, passes, reply)
                    if reply.fatal:
                        self.seen.fatal = reply.error
                    return self._fail(
                        regime,
                        case,
                        c,
                        passes,
                        reply,
                        f"{self.where(reply)}forward raised {reply.error}{self.source(reply)}",
                    )
                kernels.update(reply.kernels)
                if reply.violations:
                    return self._guarded(regime, case, c, passes, reply)
                if reply.mutated is not None:
                    return self._fail(
                        regime,
                        case,
                        c,
                        passes,
                        reply,
                        f"input {reply.mutated} was modified in place by forward",
                    )
                t0 = time.perf_counter()
                want = self.expected.outputs(case)
                self.seen.add("expected", time.perf_counter() - t0)
                if (
                    case.buffer
                    and previous is not None
                    and tensors_equal(got, previous[0])
                    and not tensors_equal(want, previous[1])
                ):
                    return self._fail(
                        regime,
                        case,
                        c,
                        passes,
                        reply,
                        "output unchanged although the inputs changed (output cached by input pointer or value?)",
                    )
                t0 = time.perf_counter()
                cmp = self.compare(got, want, tol, case)
                self.seen.add("compare", time.perf_counter() - t0)
                if not cmp.ok:
                    return self._fail(regime, case, c, passes, reply, cmp.message)
                max_abs, max_rel = max(max_abs, cmp.max_abs_err), max(max_rel, cmp.max_rel_err)
                if cmp.criterion not in ("", REFERENCE):
                    by_float64.setdefault(case.label, cmp)
                if case.buffer:
                    previous = (got, want)
            c += 1
            passes = max(passes, self.seen.passes)  # an autotuned kernel first seen here
            if c == 1 and passes > 1:
                self._time_for_passes(time.perf_counter() - started, passes)
        if skipped and len(skipped) == passes:
            return RegimeOutcome(
                regime=regime.name,
                status=Status.FAILED,
                dtype=regime.dtype,
                message="no autotune config can launch here: " + "; ".join(skipped),
                configs_checked=passes,
            )
        crossed = mixed.check(self, regime, tol)  # the tables' rows chosen apart
        if crossed is not None:
            return crossed
        beyond = sum(1 for case in regime.cases if case.kind != "get_inputs")
        msg = f"{len(regime.cases) - beyond} trials passed"
        if beyond:
            msg += f", and {beyond} case(s) beyond get_inputs"
        if passes > 1:
            msg += f" under each of {passes - len(skipped)} launchable autotune configs"
            msg += ", and chosen apart" if mixed.apart(self.seen.autotuners) else ""
        if skipped:
            msg += f" (skipped, as the autotuner skips them: {'; '.join(skipped)})"
        criterion = REFERENCE
        if by_float64:  # the loosest criterion that decided a case, and what it measured
            loosest = max(by_float64.values(), key=lambda c: c.criterion == TORCH_ERROR)
            criterion = loosest.criterion
            msg += (
                f"; {len(by_float64)} case(s) beyond tolerance of the reference's own output "
                f"passed against its float64 evaluation ({', '.join(by_float64)}): {loosest.note}"
            )
        return RegimeOutcome(
            regime=regime.name,
            status=Status.PASSED,
            message=msg,
            trials=len(regime.cases) - beyond,
            dtype=regime.dtype,
            max_abs_err=max_abs,
            max_rel_err=max_rel,
            tolerance=tol(regime.dtype) if regime.dtype else None,
            configs_checked=passes - len(skipped),
            kernels=sorted(kernels),
            criterion=criterion,
        )

    def _fail(
        self, regime: RefRegime, case: RefCase, c: int, passes: int, reply: CallReply, msg: str
    ) -> RegimeOutcome:
        label = case.label if case.kind == "get_inputs" else f"{case.label} (beyond get_inputs)"
        msg = f"{label}: {msg}"
        if passes > 1 and reply.forced:
            forced = "; ".join(f"{k}: {v}" for k, v in reply.forced.items())
            msg = f"autotune config {c + 1}/{passes} ({forced}), {msg}"
        trials = next((i + 1 for i, k in enumerate(regime.cases) if k is case), 1)
        return RegimeOutcome(
            regime=regime.name,
            status=Status.FAILED,
            message=msg,
            trials=trials,
            dtype=regime.dtype,
            configs_checked=c + 1,
        )

    def late_calls(self, regimes: list[RefRegime]) -> str | None:
        """Calls at indices the candidate cannot know: behaviour that changes after N calls."""
        if not regimes:
            return None
        smallest = min(regimes, key=lambda r: r.nbytes)
        extra = 2 + secrets.randbelow(max(1, min(self.seen.calls, 12)))
        tol = self.tolerance_for(smallest)
        configs = list(range(self.seen.passes))
        for i in range(extra):
            case = smallest.cases[secrets.randbelow(len(smallest.cases))]
            while True:
                chosen = configs[secrets.randbelow(len(configs))]
                reply, got = self.call(smallest, case, chosen)
                if reply.ok or not reply.skip or len(configs) == 1:
                    break
                configs.remove(chosen)  # a config the autotuner skips: not one it can pick
            if not reply.ok or got is None:
                return f"late call {i + 1}/{extra} on {smallest.name}: forward raised {reply.error}"
            if reply.violations:
                self.seen.violation = f"late call {i + 1}/{extra}: " + "; ".join(reply.violations)
                return self.seen.violation
            want = self.expected.outputs(case)
            cmp = self.compare(got, want, tol, case)
            if not cmp.ok:
                return f"late call {i + 1}/{extra} ({self.seen.calls} calls in all) on {smallest.name}, {case.label}: {cmp.message}"
        return None

    # GPU ----------------------------------------------------------------------------------------
    def device_kernels(self, regime: RefRegime) -> str | None:
        """None if every device kernel of one forward is the candidate's Triton code or a copy."""
        with self.hold():
            reply = self.harness.request(
                {
                    "op": "kernels",
                    "regime": regime.name,
                    "init": str(self.inputs / regime.init),
                    "inputs": str(self.inputs / regime.cases[0].inputs),
                },
                KernelsReply,
            )
        if not reply.ok:
            return f"listing the device kernels failed: {reply.error}"
        ours = set(reply.launched) | self.seen.kernels
        foreign = [
            k
            for k in reply.device_kernels
            if not ALLOWED_DEVICE_KERNELS.search(k)
            and not any(k == n or k.startswith(n) for n in ours)
        ]
        if foreign:
            return f"device kernels that are not the candidate's Triton code ran: {', '.join(foreign[:5])}"
        return None

    def graph_replay(self, regime: RefRegime) -> str | None:
        """Replay the captured forward on every case; None when all match. A capture that
        fails is reported, not failed: the other checks stand."""
        cases = regime.cases
        outs = [str(self.harness.out / f"replay-{regime.name}-{i}.pt") for i in range(len(cases))]
        with self.hold():
            t0 = time.perf_counter()
            reply = self.harness.request(
                {
                    "op": "graph_check",
                    "regime": regime.name,
                    "init": str(self.inputs / regime.init),
                    "inputs": [str(self.inputs / cases[0].inputs)]
                    + [str(self.inputs / c.inputs) for c in cases],
                    "outs": outs,
                },
                GraphReply,
            )
        self.seen.add("replay", time.perf_counter() - t0)
        if reply.capture_failed:
            self.seen.not_replayed.append(f"{regime.name} (capture failed: {reply.error})")
            return None
        if not reply.ok:
            return f"graph replay: {reply.error}"
        tol = self.tolerance_for(regime)
        for case, path in zip(cases, outs, strict=True):
            t0 = time.perf_counter()
            got = load_outputs(Path(path))
            Path(path).unlink(missing_ok=True)
            want = self.expected.outputs(case)
            t1 = time.perf_counter()
            cmp = self.compare(got, want, tol, case)
            self.seen.add("replay_read", t1 - t0)
            self.seen.add("replay_compare", time.perf_counter() - t1)
            if not cmp.ok:
                return f"CUDA-graph replay, {case.label}: {cmp.message} (the forward's result does not come from its device work)"
        return None


def load_candidate(
    harness: Harness, req: GateRequest, path: str | None = None
) -> StageResult | None:
    """None when ModelNew loaded; else the LOAD failure naming the candidate file (or `path`,
    the base that a candidate is timed beside)."""
    path = path or req.candidate
    reply = harness.request(
        {"op": "load", "candidate": path, "device": req.device, "seed": req.config.seed},
        LoadReply,
    )
    if reply.ok:
        return None
    where = path + (f":{reply.line}" if reply.line else "")
    text = f"{where}: {reply.error}"
    if reply.source_line:
        text += f"\n    {reply.source_line.rstrip()}"
    if reply.expected:
        text += f"\nexpected: {reply.expected}"
    return failed(Stage.LOAD, text)
