"""The profile stage (GPU only): the candidate, its base, eager and torch.compile timed alike.

Each regime is timed in rounds (gate/devtime.py: device time by CUDA-graph replay over input
sets several times the L2, host time by eager launches). When the call has a base (the parent
in a walk, the best so far in optimize), the base runs in a harness of its own and the rounds
interleave, A B B A ..., so a speedup is a ratio measured side by side, at the same clocks,
with its per-round range. A regime whose floor is a few microseconds, or whose kernels take
little more than an empty launch, is launch-bound: timed, shown, never evidence. The
roofline floor is the fewest bytes (inputs read once, outputs written once) over the measured
copy bandwidth, or the problem's flop_count over the matmul rate, whichever is larger. A
candidate under that floor computed at the datasheet peaks, or more than
max_speedup_vs_reference times faster than eager and than torch.compile (where it was timed)
while within suspicious_floor_fraction of the floor, is flagged: physics says it skipped work or
cached a result.
"""

from __future__ import annotations

import time
from typing import Any

from klineage.gate.devtime import quantiles
from klineage.gate.records import (
    ConfigTime,
    ProfileRow,
    RegimeOutcome,
    Stage,
    StageNumbers,
    StageResult,
    Status,
    within_noise,
)
from klineage.gate.request import GateRequest


def _nbytes(values: Any) -> int:
    import torch

    from klineage.gate.compare import as_outputs

    return sum(
        v.numel() * v.element_size() for v in as_outputs(values) if isinstance(v, torch.Tensor)
    )


def floor_from(
    nbytes: int, flops: float | None, cfg: Any, *, peak: bool = False
) -> tuple[float, str]:
    """The roofline floor in ms: measured ceilings by default, datasheet peaks with peak=True."""
    bytes_ms = nbytes / (cfg.peak_bytes_per_s if peak else cfg.copy_bytes_per_s) * 1e3
    if flops is not None:
        flops_ms = flops / (cfg.peak_flops_per_s if peak else cfg.matmul_flops_per_s) * 1e3
        if flops_ms > bytes_ms:
            return flops_ms, "flops"
    return bytes_ms, "bytes"


def floor_ms(
    problem: Any, inputs: list[Any], outputs: Any, req: GateRequest, *, peak: bool = False
) -> tuple[float, str]:
    """The roofline floor of one call: inputs read once, outputs written once, or flop_count."""
    nbytes = _nbytes(inputs) + _nbytes(outputs)
    flop_count = getattr(problem.module, "flop_count", None)
    flops = float(flop_count(*inputs)) if callable(flop_count) else None
    return floor_from(nbytes, flops, req.config, peak=peak)


def spin_up_gpu(ms: float, device: str = "cuda") -> int:
    """Keep the device busy for `ms` milliseconds of wall time (bf16 matmuls), so timing and
    autotuning start at working clocks, not the idle ones (an H200 reads 345 MHz idle, 1980
    MHz at most). Gate calls of several workers leave the GPU idle between their locked stages.
    Nothing of the card's settings is touched. Returns the number of matmuls run."""
    import torch

    n = 2048 if device == "cuda" else 64
    a = torch.randn(
        n, n, device=device, dtype=torch.bfloat16 if device == "cuda" else torch.float32
    )
    t0, runs = time.perf_counter(), 0
    while (time.perf_counter() - t0) * 1e3 < ms:
        for _ in range(4):
            a @ a
        runs += 4
        if device == "cuda":
            torch.cuda.synchronize()
    return runs


class Side:
    """A process that times a loaded ModelNew: the candidate's harness, or the base's."""

    def __init__(self, harness: Any, inputs: Any) -> None:
        self.harness, self.inputs = harness, inputs
        # regime -> the config its rounds run (after a sweep): an index, or each kernel's row
        self.force: dict[str, int | dict[str, int]] = {}

    def time(
        self,
        regime: Any,
        samples: int,
        *,
        force: int | dict[str, int] | None = None,
        keep: bool = True,
    ) -> Any:
        from klineage.gate.protocol import TimeReply

        if force is None:
            force = self.force.get(regime.name)
        return self.harness.request(
            {
                "op": "time",
                "regime": regime.name,
                "init": str(self.inputs / regime.init),
                "inputs": str(self.inputs / regime.cases[0].inputs),
                "samples": samples,
                "force_config": force,
                "keep": keep,
            },
            TimeReply,
        )


def _median(xs: list[float]) -> float:
    import statistics

    return float(statistics.median(xs))


class _Timed:
    """What the rounds of one side gave on one regime."""

    def __init__(self) -> None:
        self.device: list[list[float]] = []
        self.host: list[list[float]] = []
        self.capture_error: str | None = None
        self.sets = 1
        self.picked: dict[str, str] = {}

    def add(self, reply: Any) -> None:
        self.device.append(list(reply.device))
        self.host.append(list(reply.host))
        self.capture_error = reply.capture_error
        self.sets = reply.sets
        self.picked = dict(reply.forced or reply.picked)  # forced: the sweep's fastest

    def has_device(self) -> bool:
        return bool(self.device) and all(self.device)

    def rounds(self, basis: str) -> list[float]:
        return [_median(r) for r in (self.device if basis == "device" else self.host)]

    def flat(self, basis: str) -> list[float]:
        return [x for r in (self.device if basis == "device" else self.host) for x in r]


def time_regime(
    regime: Any, cand: Side, base: Side | None, cfg: Any
) -> tuple[_Timed, _Timed | None, str | None]:
    """Interleaved rounds on one regime; the base's failure is reported, not charged."""
    from klineage.gate.session import CandidateDied

    mine, theirs, base_error = _Timed(), _Timed() if base is not None else None, None
    for i in range(cfg.timing_rounds):
        order = [cand, base] if i % 2 == 0 else [base, cand]
        for side in order:
            if side is None or (side is base and base_error):
                continue
            if side is cand:
                reply = cand.time(regime, cfg.timing_samples)
                if not reply.ok:
                    raise TimingFailed(f"{regime.name}: timing failed: {reply.error}")
                mine.add(reply)
                continue
            try:
                reply = side.time(regime, cfg.timing_samples)
            except CandidateDied as e:
                base_error = f"the base's process: {e}"
                continue
            if not reply.ok:
                base_error = f"the base: {reply.error}"
                continue
            assert theirs is not None
            theirs.add(reply)
    if base_error:
        theirs = None
    return mine, theirs, base_error


class TimingFailed(Exception):
    pass


# A kernel's other row replaces the one its fastest index gave only when this much faster in
# the one timing each config gets: the sweep's rows chosen apart are then side by side timed.
APART_GAIN = 0.02


def sweep(
    regime: Any, cand: Side, table: int, cfg: Any, autotuners: dict[str, int] | None = None
) -> list[ConfigTime]:
    """Each config of the candidate's autotune table (the first cfg.configs_per_call) timed
    once on this regime, forced; the fastest is then the one its side-by-side rounds run.
    A config that cannot run here (the autotuner would skip it) is recorded with why. Where
    two or more kernels are tuned (`autotuners`: kernel -> configs), config c makes each take
    its row c, so a kernel's best row beside another's is missed (2026-12-07d, the long-K
    matmul: its product kernel ran fastest at STEP 512 and its sum kernel at BLOCK 16, rows 0
    and 6); each kernel's rows are then timed one kernel at a time from the fastest (apart)."""
    curve: list[ConfigTime] = []
    for k in range(min(table, cfg.configs_per_call)):
        curve.append(_timed(regime, cand, cfg, k, ConfigTime(index=k)))
    timed = [c for c in curve if c.ms is not None]
    if not timed:
        raise TimingFailed(
            f"{regime.name}: no config of the autotune table ran: "
            + "; ".join(f"{c.index}: {c.error}" for c in curve[:3])
        )
    best = min(timed, key=lambda c: c.ms or 0.0)
    cand.force[regime.name] = best.index
    from klineage.gate import mixed

    chosen_apart = mixed.apart(autotuners or {})  # two or more kernels tuned
    return curve + (apart(regime, cand, cfg, best, autotuners or {}) if chosen_apart else [])


def apart(
    regime: Any, cand: Side, cfg: Any, best: ConfigTime, autotuners: dict[str, int]
) -> list[ConfigTime]:
    """From the fastest index, each tuned kernel's other rows timed with the others' rows held
    (coordinate by coordinate, in the order the kernels were first seen), a row kept when
    APART_GAIN faster than the best so far; where rows so kept differ from the index's, the
    rounds run them (cand.force's regime holds the dict, which the gate then checks for
    correctness: gate/mixed.py `chosen`)."""
    from klineage.gate.harness_monitors import table_row

    rows = {name: table_row(best.index, n) for name, n in autotuners.items()}
    start, fastest = dict(rows), best.ms or 0.0
    extra: list[ConfigTime] = []
    for name, n in autotuners.items():
        held = rows[name]
        for r in range(min(n, cfg.configs_per_call) if n > 1 else 0):
            if r == held:
                continue
            trial = {**rows, name: r}
            c = _timed(regime, cand, cfg, trial, ConfigTime(index=best.index, rows=trial))
            extra.append(c)
            if c.ms is not None and c.ms < fastest * (1.0 - APART_GAIN):
                rows, fastest = trial, c.ms
    if rows != start:
        cand.force[regime.name] = rows
    return extra


def _timed(regime: Any, cand: Side, cfg: Any, force: Any, entry: ConfigTime) -> ConfigTime:
    """`entry` with the median of one timing under `force`, or why it could not run."""
    reply = cand.time(regime, cfg.timing_samples, force=force, keep=False)
    if not reply.ok:
        return entry.model_copy(update={"error": str(reply.error)[:300]})
    xs = reply.device if cfg.time_basis == "device" and reply.device else reply.host
    config = "; ".join(sorted(set(reply.forced.values())))
    return entry.model_copy(update={"config": config, "ms": _median(xs)})


def regime_row(
    regime: Any,
    mine: _Timed,
    theirs: _Timed | None,
    base_error: str | None,
    cfg: Any,
    launch_ms: float | None,
) -> ProfileRow:
    """The ProfileRow of one regime from both sides' rounds."""
    basis = "device" if cfg.time_basis == "device" and mine.has_device() else "host"
    if theirs is not None and basis == "device" and not theirs.has_device():
        basis = "host"  # a ratio compares like with like
    k20, k50, k80 = quantiles(mine.flat(basis))
    h20, h50, h80 = quantiles(mine.flat("host"))
    per_round = mine.rounds(basis)
    row: dict[str, Any] = {
        "kernel_ms": k50,
        "kernel_p20_ms": k20,
        "kernel_p80_ms": k80,
        "basis": basis,
        "host_ms": h50,
        "host_p20_ms": h20,
        "host_p80_ms": h80,
        "capture_error": mine.capture_error,
        "sets": mine.sets,
        "rounds": len(per_round),
        "spread": (max(per_round) - min(per_round)) / _median(per_round) if per_round else 0.0,
        "autotune": mine.picked,
        "launch_ms": launch_ms,
        "base_error": base_error,
    }
    if mine.has_device():
        row["device_p20_ms"], row["device_ms"], row["device_p80_ms"] = quantiles(
            mine.flat("device")
        )
    if theirs is not None:
        theirs_rounds = theirs.rounds(basis)
        ratios = [b / c for b, c in zip(theirs_rounds, per_round, strict=False) if c > 0]
        if ratios:
            row["base_ms"] = _median(theirs.flat(basis))
            row["ratio"], row["ratio_lo"], row["ratio_hi"] = (
                _median(ratios),
                min(ratios),
                max(ratios),
            )
            row["within_noise"] = within_noise(row["ratio"], row["ratio_lo"], row["ratio_hi"])
    row["floor_ms"], row["floor_kind"] = floor_from(regime.nbytes, regime.flops, cfg)
    row["floor_ceiling"] = (
        cfg.copy_bytes_per_s if row["floor_kind"] == "bytes" else cfg.matmul_flops_per_s
    )
    row["peak_floor_ms"] = floor_from(regime.nbytes, regime.flops, cfg, peak=True)[0]
    row["pct_of_floor"] = 100.0 * row["floor_ms"] / k50
    eager = regime.eager_ms if basis == "device" else regime.eager_host_ms
    compiled = regime.compile_ms if basis == "device" else regime.compile_host_ms
    if eager is not None:
        row["eager_ms"], row["speedup_vs_eager"] = eager, eager / k50
    if compiled is not None:
        row["compile_ms"], row["speedup_vs_compile"] = compiled, compiled / k50
    row["compile_error"] = regime.compile_error
    devices = [row.get("device_ms")]
    if theirs is not None and theirs.has_device():
        devices.append(_median(theirs.flat("device")))
    slowest_device = max((d for d in devices if d), default=0.0)
    row["launch_bound"] = row["floor_ms"] * 1e3 < cfg.launch_bound_floor_us or bool(
        launch_ms and slowest_device and slowest_device < cfg.launch_bound_factor * launch_ms
    )
    fastest = min(x for x in (k50, row.get("device_ms")) if x)
    why = []
    if fastest < row["peak_floor_ms"]:
        why.append(
            f"{fastest:.4g} ms is under the roofline floor {row['peak_floor_ms']:.4g} ms "
            f"({row['floor_kind']}, datasheet peaks)"
        )
    # Against the faster of eager and torch.compile where both were timed: eager launching
    # several kernels on a few-microsecond regime is slow, and beating it 10x there is what
    # torch.compile does too (a naive bf16 column max, 1.6 us: 10.2x eager, 0.89x compile).
    # Only where the candidate is near the floor (suspicious_floor_fraction of its speed or
    # faster): a reference far from the floor is beaten further by any sound kernel (eager's
    # softmax over dim 0 in fp16, 0.12% of the floor on an H100, was beaten 199x by a split online
    # walk still at 24%), and below that fraction the floor, which the reference process
    # measures from the real tensors, is what bounds the work left undone.
    vs = [x for x in (row.get("speedup_vs_eager"), row.get("speedup_vs_compile")) if x]
    near_floor = row["pct_of_floor"] >= 100.0 * cfg.suspicious_floor_fraction
    if vs and min(vs) > cfg.max_speedup_vs_reference and near_floor:
        than = "eager and torch.compile" if len(vs) == 2 else "eager"
        why.append(f"{min(vs):.1f}x faster than {than} (limit {cfg.max_speedup_vs_reference:g}x)")
    row["suspicious"] = why
    return ProfileRow.model_validate(row)


def describe(row: ProfileRow) -> str:
    """One line per regime: the time, its basis and spread, the ratio to the base."""
    text = f"{row.kernel_ms * 1e3:.4g} us ({row.basis}, spread {100 * row.spread:.0f}%)"
    if row.basis == "device":
        text += f", host {row.host_ms * 1e3:.4g} us"
    elif row.capture_error:
        text += f" [no device time: {row.capture_error}]"
    if row.ratio is not None:
        text += f", {row.ratio:.3g}x the base [{row.ratio_lo:.3g}-{row.ratio_hi:.3g}]"
        if row.within_noise:
            text += " within noise"
    elif row.base_error:
        text += f", base not timed ({row.base_error})"
    if row.speedup_vs_eager is not None:
        text += f", {row.speedup_vs_eager:.2f}x eager"
    if row.pct_of_floor is not None:
        text += f", {row.pct_of_floor:.0f}% of floor"
    if row.launch_bound:
        text += ", launch-bound (not evidence)"
    if row.configs and row.config_index is not None:
        best = next(
            c
            for c in row.configs
            if c.index == row.config_index and c.rows == (row.config_rows or c.rows)
        )
        diagonal = sum(1 for c in row.configs if c.rows is None)
        text += (
            f"; config {best.index + 1} of {diagonal} timed"
            f"{f' ({row.configs_in_table} in the table)' if (row.configs_in_table or 0) > diagonal else ''}"
            f" fastest: {best.config}"
        )
        if row.config_rows:
            text += f" (each kernel's row chosen apart: {row.config_rows})"
    return text


def profile_stage(
    req: GateRequest,
    regimes: list[Any],
    cand: Side,
    event: Any,
    *,
    base: Side | None = None,
    launch_ms: float | None = None,
    table: int = 1,
    autotuners: dict[str, int] | None = None,
) -> StageResult:
    """Time the candidate (beside its base, when given) on each verified regime, beside the
    reference's eager and torch.compile times, and flag results faster than physics. A
    candidate whose autotune table has several configs (`table`: the most any of its kernels
    has) is swept first: each config timed once per regime, and where two or more kernels are
    tuned (`autotuners`) each one's rows apart, the fastest timed side by side."""
    cfg = req.config
    t0 = time.perf_counter()
    rows: dict[str, ProfileRow] = {}
    outcomes: list[RegimeOutcome] = []
    suspicious: list[str] = []
    for regime in regimes:
        event("progress", detail=f"profile {regime.name}")
        try:
            curve = sweep(regime, cand, table, cfg, autotuners) if table > 1 else []
            mine, theirs, base_error = time_regime(regime, cand, base, cfg)
        except TimingFailed as e:
            return StageResult(stage=Stage.PROFILE, status=Status.FAILED, message=str(e))
        row = regime_row(regime, mine, theirs, base_error, cfg, launch_ms)
        if curve:
            chosen = cand.force.get(regime.name)
            apart_rows = chosen if isinstance(chosen, dict) else None
            row = row.model_copy(
                update={
                    "configs": curve,
                    "configs_in_table": table,
                    "config_index": next(c.index for c in curve if c.rows == apart_rows)
                    if apart_rows
                    else chosen,
                    "config_rows": apart_rows,
                }
            )
        rows[regime.name] = row
        status, msg = Status.PASSED, describe(row)
        if row.suspicious:
            suspicious.append(f"{regime.name}: " + "; ".join(row.suspicious))
            if not cfg.allow_suspicious:
                status = Status.FAILED
            msg += " [suspicious: " + "; ".join(row.suspicious) + "]"
        outcomes.append(RegimeOutcome(regime=regime.name, status=status, message=msg))
    if suspicious and not cfg.allow_suspicious:
        return StageResult(
            stage=Stage.PROFILE,
            status=Status.FAILED,
            regimes=outcomes,
            numbers=StageNumbers(regimes=rows),
            message="suspiciously fast (rerun with --allow-suspicious if you are sure): "
            + " | ".join(suspicious),
            seconds=time.perf_counter() - t0,
        )
    return StageResult(
        stage=Stage.PROFILE,
        status=Status.PASSED,
        message="; ".join(f"{o.regime}: {o.message}" for o in outcomes),
        regimes=outcomes,
        numbers=StageNumbers(regimes=rows, launch_ms=launch_ms, basis=cfg.time_basis),
        seconds=time.perf_counter() - t0,
    )
