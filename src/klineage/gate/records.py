"""The gate's records: what each stage found, and the environment every number came from."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)


class Stage(StrEnum):
    """Gate stages in the order they run."""

    LOAD = "load"
    STATIC_GUARDS = "static_guards"
    COMPILE = "compile"
    RUNTIME_GUARDS = "runtime_guards"
    CORRECTNESS = "correctness"
    PROFILE = "profile"


STAGE_ORDER: tuple[Stage, ...] = tuple(Stage)


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    # The stage did not run because an earlier one failed.
    SKIPPED = "skipped"
    # The stage cannot measure on this device (profile on the CPU); never a made-up number.
    NOT_MEASURED = "not_measured"


class Fault(StrEnum):
    """Whose file a rejection is charged to: the CLI exits 1 for the candidate, 2 for the problem."""

    CANDIDATE = "candidate"
    PROBLEM = "problem"


class Environment(BaseModel):
    """Where a result was obtained. Every effect and benchmark row carries one."""

    device: str
    gpu_name: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str
    triton: str
    klineage: str
    python: str
    interpreter: bool
    timing_method: str
    date: str


class RegimeOutcome(BaseModel):
    """Correctness (and, on a GPU, timing) of one regime."""

    regime: str
    status: Status
    message: str = ""
    trials: int = 0
    dtype: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    tolerance: float | None = None
    # What decided the regime's floating outputs (gate/compare.py), the loosest over its cases:
    # "reference" (the tolerance of the reference's own output), "float64" (of the reference
    # evaluated in float64) or "float64+torch_error" (a multiple of PyTorch's own error too).
    criterion: str | None = None
    configs_checked: int = 1
    # The Triton kernels the candidate launched on this regime (by function name): which code a
    # timing of this regime exercised.
    kernels: list[str] = Field(default_factory=list)
    # The sizes it ran at (after --set): each input's shape ([] for a non-tensor) and dtype.
    input_shapes: list[list[int]] = Field(default_factory=list)
    input_dtypes: list[str] = Field(default_factory=list)


# The smallest difference a ratio must show to count: the naive softmax timed beside itself on
# the H200 read 0.986-1.012 over eleven regimes (docs/benchmarks.md, "Measurement"), so any
# ratio within 2% of 1 is within noise whatever its per-round range says.
NOISE_FLOOR = 0.02


def within_noise(ratio: float, lo: float, hi: float) -> bool:
    """A ratio its measured range cannot tell from 1: the range holds 1, or the ratio is within
    NOISE_FLOOR of 1 (the same kernel timed beside itself differs that much)."""
    return lo <= 1.0 <= hi or abs(ratio - 1.0) < NOISE_FLOOR


class ConfigTime(BaseModel):
    """One config of an autotune table timed on one regime by the gate's sweep (gate/profile.py):
    its index in the table, what it sets, its median time (kernel_ms's basis), or why not. Where
    a file tunes two or more kernels, the sweep then varies one kernel's row at a time from the
    fastest index: such a config has `rows` (each kernel's row; `index` the one it varied from)."""

    index: int
    rows: dict[str, int] | None = None
    config: str = ""
    ms: float | None = None
    error: str | None = None


class ProfileRow(BaseModel):
    """One regime's timing (gate/profile.py), in ms per call.

    kernel_ms is what decisions use (device time unless --time host asked for host time, or the
    forward could not be captured). `ratio` is the base's time over the candidate's, measured
    side by side in the same gate call (rounds interleaved A B B A ...); ratio_lo/ratio_hi are
    its smallest and largest per-round values, and `within_noise` says that range holds 1.
    """

    kernel_ms: float
    kernel_p20_ms: float
    kernel_p80_ms: float
    basis: str  # "device" or "host": what kernel_ms is; "old" for rows of the old timing
    device_ms: float | None = None
    device_p20_ms: float | None = None
    device_p80_ms: float | None = None
    host_ms: float
    host_p20_ms: float
    host_p80_ms: float
    capture_error: str | None = None  # why there is no device time
    spread: float = 0.0  # (max - min) / median of the per-round medians of kernel_ms
    rounds: int = 1
    sets: int = 1  # input sets the calls rotated over
    base_ms: float | None = None
    ratio: float | None = None
    ratio_lo: float | None = None
    ratio_hi: float | None = None
    within_noise: bool | None = None
    base_error: str | None = None
    launch_bound: bool = False
    launch_ms: float | None = None
    floor_ms: float | None = None
    floor_kind: str | None = None
    # What floor_ms divided by (bytes/s or FLOP/s, floor_kind's): the gate's ceilings are the
    # H200's on every card unless set, so a row says which card's floor its % is of.
    floor_ceiling: float | None = None
    peak_floor_ms: float | None = None
    pct_of_floor: float | None = None
    eager_ms: float | None = None
    speedup_vs_eager: float | None = None
    compile_ms: float | None = None
    speedup_vs_compile: float | None = None
    compile_error: str | None = None
    autotune: dict[str, str] = Field(default_factory=dict)  # kernel -> config it picked here
    # A candidate carrying an autotune table: every config (up to configs_per_call) timed once
    # here, and the index of the fastest, which the rounds above then timed (forced); with
    # config_rows, each kernel's own row, where rows chosen apart ran faster than any index.
    configs: list[ConfigTime] = Field(default_factory=list)
    config_index: int | None = None
    config_rows: dict[str, int] | None = None
    configs_in_table: int | None = None
    suspicious: list[str] = Field(default_factory=list)


class StageNumbers(BaseModel):
    """What a stage measured: the load stage the regimes it found, the compile stage its first
    call's launches and the autotune configs seen, the profile stage its per-regime timing
    (with `launch_ms` and `basis` when it passed).

    The JSON keeps the shape these had as a plain dict: a field the stage did not set is left
    out (not written as null), a row leaves out its None fields, and the load stage's names are
    written under "regimes" as a list (the profile stage's rows are a dict there)."""

    # Every shape ever stored validates (old rows are read below), so a key no stage writes is
    # a mistake, not history.
    model_config = ConfigDict(extra="forbid")

    regime_names: list[str] | None = None  # load; "regimes" in the JSON
    # load: wall seconds by part (reference and its parts by kind, cached_cases, cache_put,
    # split, candidate), lock and disk waits left out
    load_s: dict[str, float] | None = None
    # correctness: wall seconds by part (harness, forward within it, read, expected, compare;
    # on a GPU also the CUDA-graph replay's replay, replay_read, replay_compare after timing;
    # gate/checker.py Checked.spent), lock waits left out
    correctness_s: dict[str, float] | None = None
    launches: int | None = None  # compile
    autotune_configs: int | None = None  # compile: the autotune passes of the first call
    regimes: dict[str, ProfileRow] = Field(default_factory=dict)  # profile
    # The empty kernel's launch time (gate/profile.py: launch-bound regimes), None if unmeasured.
    launch_ms: float | None = None
    basis: Literal["device", "host"] | None = None  # the time basis asked for (--time)

    @model_validator(mode="before")
    @classmethod
    def _load_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("regimes"), list):
            return {
                **{k: v for k, v in data.items() if k != "regimes"},
                "regime_names": data["regimes"],
            }
        return data

    @field_validator("regimes", mode="before")
    @classmethod
    def _current_rows(cls, rows: Any) -> Any:
        """Rows from before the timing had its current shape (protocol < 4: no host time) are
        read with what they have, as basis "old"."""
        if rows is None:
            return {}
        if not isinstance(rows, dict):
            return rows  # not rows: the validation says so
        return {name: _current_row(row) for name, row in rows.items()}

    @field_serializer("regimes")
    def _rows_without_nulls(
        self, rows: dict[str, ProfileRow], info: SerializationInfo
    ) -> dict[str, Any]:
        return {r: row.model_dump(mode=info.mode, exclude_none=True) for r, row in rows.items()}

    @model_validator(mode="after")
    def _one_meaning_of_regimes(self) -> StageNumbers:
        if {"regime_names", "regimes"} <= self.model_fields_set:
            raise ValueError("regimes is either the load stage's names or the profile's rows")
        return self

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        out = {k: v for k, v in data.items() if k in self.model_fields_set}
        if "regime_names" in out:
            out["regimes"] = out.pop("regime_names")
        return out


def _current_row(row: Any) -> Any:
    if not isinstance(row, dict) or "host_ms" in row or "kernel_ms" not in row:
        return row  # a current row, or not a row (the validation says so)
    ms = row["kernel_ms"]  # an old row: do_bench medians, host-inclusive
    p20, p80 = row.get("kernel_p20_ms", ms), row.get("kernel_p80_ms", ms)
    return {
        **row,
        "basis": "old",
        "host_ms": ms,
        "host_p20_ms": p20,
        "host_p80_ms": p80,
        "kernel_p20_ms": p20,
        "kernel_p80_ms": p80,
    }


class StageResult(BaseModel):
    stage: Stage
    status: Status
    message: str = ""
    numbers: StageNumbers = Field(default_factory=StageNumbers)
    regimes: list[RegimeOutcome] = Field(default_factory=list)
    seconds: float = 0.0


class GateResult(BaseModel):
    """The verdict on one candidate: accepted only if every stage that ran passed."""

    problem: str
    candidate: str
    device: str
    regimes: list[str] = Field(default_factory=list)
    # --set NAME=VALUE: the problem's module-level assignments rebound before it ran (the
    # sizes the verdict holds at).
    overrides: dict[str, Any] = Field(default_factory=dict)
    accepted: bool
    stages: list[StageResult]
    environment: Environment | None = None
    cache_key: str = ""
    cached: bool = False
    seconds: float = 0.0
    # Set when rejected: whose fault it is. A problem fault is not a verdict on the candidate.
    fault: Fault | None = None
    # How the candidate and the problem ran (gate/sandbox.py: bwrap, uid or process) and what
    # that level does and does not promise.
    isolation: str = ""
    # Calls of the candidate's forward whose outputs were compared, all regimes together.
    calls_checked: int = 0
    # Rejected because the time ran out: not cached, since it may be the machine's load.
    timed_out: bool = False
    # sha256 of the candidate's source, and of the base it was timed beside (None without one):
    # a ProfileRow's ratio is against that base only (klineage/metrics.py pairs them).
    candidate_sha: str = ""
    base_sha: str | None = None
    # Seconds spent waiting for the GPU lock (other gate calls) or for free disk: not charged
    # to --timeout.
    lock_wait_s: float = 0.0
    lock_wait_exclusive_s: float = 0.0  # the part of it spent waiting to time (GPU alone)

    @property
    def failed_stage(self) -> Stage | None:
        for s in self.stages:
            if s.status is Status.FAILED:
                return s.stage
        return None

    @property
    def message(self) -> str:
        """The first failure's message, or a one-line summary when accepted."""
        for s in self.stages:
            if s.status is Status.FAILED:
                return f"{s.stage.value}: {s.message}"
        return "accepted"

    def stage(self, stage: Stage) -> StageResult | None:
        for s in self.stages:
            if s.stage is stage:
                return s
        return None

    def profile_rows(self) -> dict[str, ProfileRow]:
        """Per-regime timing; empty when not measured (the CPU, or a rejection)."""
        stage = self.stage(Stage.PROFILE)
        return dict(stage.numbers.regimes) if stage is not None else {}


# A GateResult as JSON (GateResult.model_dump(mode="json")), the form in which the store keeps a
# verdict in lineage nodes, trials and runs and gives it back. Its shape is GateResult's; it stays
# JSON across packages because metrics.speedups and the store pass it so, and whatever reads
# numbers from it goes through the models (profile_rows: StageNumbers, which also reads rows of
# the old timing), never field by field. Read-only: a reader cannot change a stored verdict.
GateJSON = Mapping[str, object]

# --set NAME=VALUE values (cli/common.parse_set: ast.literal_eval, else the text as a string):
# numbers, strings, booleans, None, and tuples or lists of them, rebound as the problem's
# module globals before it runs.
OverrideValue = int | float | bool | str | None | tuple[Any, ...] | list[Any]
Overrides = dict[str, OverrideValue]


def _stored_stage(gate: GateJSON, stage: Stage) -> Mapping[str, object] | None:
    stages = gate.get("stages")
    for s in stages if isinstance(stages, list) else []:
        if isinstance(s, Mapping) and s.get("stage") == stage.value:
            return s
    return None


def profile_rows(gate: GateResult | GateJSON) -> dict[str, ProfileRow]:
    """Per-regime timing of a GateResult, or of one stored as JSON (empty when not measured)."""
    if isinstance(gate, GateResult):
        return gate.profile_rows()
    stage = _stored_stage(gate, Stage.PROFILE)
    if stage is None:
        return {}
    return StageNumbers.model_validate(stage.get("numbers") or {}).regimes


def regime_outcomes(
    gate: GateResult | GateJSON | None, stage: Stage = Stage.CORRECTNESS
) -> list[RegimeOutcome]:
    """The regimes of one stage (correctness unless asked) of a GateResult, or of one stored as
    JSON; empty when there is no verdict or that stage did not run."""
    if gate is None:
        return []
    if isinstance(gate, GateResult):
        found = gate.stage(stage)
        return list(found.regimes) if found is not None else []
    stored = _stored_stage(gate, stage)
    rows = stored.get("regimes") if stored is not None else None
    return [RegimeOutcome.model_validate(r) for r in rows] if isinstance(rows, list) else []
