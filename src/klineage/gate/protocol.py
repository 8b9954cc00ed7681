"""What crosses between the gate's processes, as typed records.

The parent (gate/session.py) writes a RefRequest for the reference process and reads back a
RefManifest (or a RefError); it sends JSON commands to the candidate's harness and validates
every reply against the models here. Anything from the candidate that does not validate is a
rejection with the reason, never a crash of the parent.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from klineage.config import GateConfig
from klineage.gate.records import Environment

# The autotune configs a call makes the candidate's kernels take (harness_monitors
# _forced_index): an index for all, "mix:R" apart, or each kernel's own row; None: their own.
Force = int | str | dict[str, int] | None

# A reply line longer than this is not a reply (a candidate flooding the channel).
MAX_REPLY_BYTES = 1 << 20


class RefRequest(BaseModel):
    problem: str
    device: str = "cpu"
    regimes: list[str] = Field(default_factory=list)
    overrides: dict[str, Any] = Field(default_factory=dict)
    config: GateConfig = Field(default_factory=GateConfig)
    # Drawn by the parent from os.urandom per call: where inputs change in place, which
    # elements grow. The candidate never sees it.
    secret: int = 0
    time_reference: bool = False


class RefCase(BaseModel):
    label: str  # "trial 2/5", "changed in place at random positions", ...
    kind: str  # "get_inputs" or "beyond get_inputs"
    inputs: str  # file name in the reference's output folder
    expected: str
    buffer: str | None = None  # delivered into the same tensors as earlier cases of this name
    # Inputs scaled beyond get_inputs scale the outputs and their rounding errors: the absolute
    # tolerance grows by the ratio of this case's largest expected value to trial 1's (>= 1).
    atol_scale: float = 1.0
    # The reference evaluated in float64 (gate/reference.py), private like `expected`: a file
    # of its outputs minus the expected ones, in float32, per output (None for outputs that are
    # not float32/float16/bfloat16). None where there is none, and float64_missing says why
    # (None too when no output is float32/float16/bfloat16).
    float64: str | None = None
    float64_missing: str | None = None


class RefRegime(BaseModel):
    name: str
    init: str
    cases: list[RefCase]
    dtype: str | None = None
    tolerance: float | None = None  # the problem's own TOLERANCES for dtype, if any
    bf16_inputs: bool = False
    skipped_variants: list[str] = Field(default_factory=list)
    nbytes: int = 0
    flops: float | None = None
    input_shapes: list[list[int]] = Field(default_factory=list)
    input_dtypes: list[str] = Field(default_factory=list)
    # The reference timed like a candidate (gate/devtime.py): device time by graph replay
    # (None where capture failed) and host time by eager launches, medians in ms.
    eager_ms: float | None = None
    eager_host_ms: float | None = None
    compile_ms: float | None = None
    compile_host_ms: float | None = None
    compile_error: str | None = None
    timing_note: str | None = None  # why a device time is missing
    # Wall seconds of the regime's build by kind: cases (inputs and the reference's forward),
    # float64, files (written), compile (torch.compile's warm-up), timing (eager and compiled).
    seconds: dict[str, float] = Field(default_factory=dict)


class RefManifest(BaseModel):
    regimes: list[RefRegime]
    environment: Environment
    launch_ms: float | None = None  # one empty kernel, graph-replayed (GPU only)
    seconds: float = 0.0


class RefError(BaseModel):
    message: str
    path: str
    line: int | None = None


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int
    ok: bool
    error: str | None = None


class LoadReply(_Reply):
    line: int | None = None
    source_line: str | None = None
    expected: str | None = None


class CallReply(_Reply):
    launches: int = 0
    kernels: list[str] = Field(default_factory=list)
    violations: list[str] = Field(default_factory=list)
    autotuners: dict[str, int] = Field(default_factory=dict)
    forced: dict[str, str] = Field(default_factory=dict)
    mutated: int | None = None
    seconds: float = 0.0
    skip: bool = False
    fatal: bool = False
    init_error: str | None = None
    line: int | None = None  # where in the candidate file the error was raised, if there
    source_line: str | None = None
    expected: str | None = None


class GraphReply(_Reply):
    outs: list[str] = Field(default_factory=list)
    capture_failed: bool = False  # the forward cannot be captured (a host sync, say)


class KernelsReply(_Reply):
    device_kernels: list[str] = Field(default_factory=list)
    launched: list[str] = Field(default_factory=list)


class TimeReply(_Reply):
    """One round of timing (gate/devtime.py): ms per call, device (graph replay) and host
    (eager launches). No device samples when the forward could not be captured."""

    device: list[float] = Field(default_factory=list, max_length=64)
    host: list[float] = Field(default_factory=list, max_length=64)
    capture_error: str | None = None
    sets: int = 1  # input sets the calls rotate over (together several times the L2)
    picked: dict[str, str] = Field(default_factory=dict)  # autotuned kernel -> config chosen
    forced: dict[str, str] = Field(default_factory=dict)  # kernel -> config forced (a sweep)
