"""bench.json, typed: a row per (problem, policy, seed) run, a summary per policy, and the file.

bench/run.py builds these and writes them; the report loads bench.json through them and reads
attributes, so no consumer re-checks a field with .get(). The JSON written is the dicts the
bench wrote before these models existed, key for key: models are dumped with exclude_unset, so
a failed run's row still has no `speedup` key at all and a summary has `anytime` only when some
run gated a candidate.

Reading is lenient on purpose, because the report must render every bench.json ever written
(benchmarks/results holds files from before `seed`, `runs`, `anytime`, `compile` and the
per-regime `status` existed), and hand-edited or truncated ones, with the reason a value is
missing rather than a refusal:
- every field has a default (None, or empty), so an old file loads;
- unknown keys are ignored (extra="ignore"): a newer or older producer's extra fields load, and
  the report shows what it knows (a `schema` other than SCHEMA is warned about);
- a number that is not a finite number (text, a bool, NaN, inf) reads as None ("–" with its
  reason), as the report's `_num` did; a malformed curve point or a row that is not an object
  is dropped.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from klineage.config import GateConfig

SCHEMA = 1

# The environment a row or a bench ran in (gate.records.Environment dumped, or {} for runs that
# never gated): kept as recorded, because the report lists it key by key in the file's order and
# old files carry keys Environment no longer has.
EnvironmentJson = dict[str, Any]


def _finite(x: object) -> float | None:
    """A finite number, or None (null, missing, text, bool, NaN and inf are not numbers here)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    v = float(x)
    return v if math.isfinite(v) else None


def _count(x: object) -> int | None:
    """A whole number (an int, or a float with no fraction), else None."""
    v = _finite(x)
    return int(v) if v is not None and v == int(v) else None


def _text(x: object) -> str | None:
    return None if x is None else str(x)


def _flag(x: object) -> bool | None:
    return x if isinstance(x, bool) else None


Number = Annotated[float | None, BeforeValidator(_finite)]
Count = Annotated[int | None, BeforeValidator(_count)]
Text = Annotated[str | None, BeforeValidator(_text)]
Flag = Annotated[bool | None, BeforeValidator(_flag)]
# One point of a run's curve: (gate calls used, best speedup so far); point 0 is the start.
CurvePoint = tuple[int, float]


class BenchJob(BaseModel):
    """One (problem, policy, seed) run's arguments (bench/run.py _job), pickled to a worker
    process or a Ray task; never written to bench.json. Paths travel as text."""

    model_config = ConfigDict(frozen=True)

    name: str  # the row's problem name (heldout/gemv)
    problem: str
    naive: str
    expert: str | None = None
    policy: str
    budget: int
    device: str
    db: str
    regimes: list[str] = Field(default_factory=list)
    seed: int = 0
    config: GateConfig
    llm: str | None = None
    skills: str | None = None  # the knowledge files run_bench wrote for this job's policy
    memory: str | None = None
    env: dict[str, str] = Field(default_factory=dict)  # KLINEAGE_* of the bench's process
    # --set NAME=VALUE literals for this problem (numbers, strings, tuples...), as parse_set
    # gives them; passed through to optimize's Settings and the gate unchanged.
    overrides: dict[str, Any] = Field(default_factory=dict)


class _Record(BaseModel):
    # extra="ignore": old and newer bench.json files carry keys this version does not model;
    # they load, and are not written back (the bench writes only what it sets).
    model_config = ConfigDict(extra="ignore")


class RegimeResult(BaseModel):
    """One timed regime of a run: the start's and the best kernel's times and their ratios."""

    # extra="allow": the optimize loop's per-regime summary is written through as it is, so a
    # key it adds reaches bench.json without a change here.
    model_config = ConfigDict(extra="allow")

    start_ms: Number = None
    best_ms: Number = None
    speedup: Number = None
    launch_bound: Flag = None
    status: Text = None  # metrics.Speedup.status, or "not measured"; absent before 2026-12-01
    vs_eager: Number = None
    vs_compile: Number = None
    pct_of_floor: Number = None


class AppliedStep(_Record):
    """A kept trial: what was applied, by which materializer, its measured and predicted gain."""

    label: Text = None
    materializer: Text = None
    speedup: Number = None
    predicted: Number = None


class BenchRow(_Record):
    """One optimize run of a bench (bench/run.py run_job). A run that failed before its start
    passed the gate has only problem, policy, seed, error, success, gate_calls, curve, label."""

    problem: str = ""
    policy: str = ""
    seed: Count = None
    error: Text = None
    run_id: Text = None
    success: Flag = None
    label: Text = None  # "measured", "predicted, not measured", "" for a failed run
    speedup: Number = None  # over the naive start, geomean over timed regimes
    gate_calls: Count = None
    curve: list[CurvePoint] = Field(default_factory=list)
    calls_to_95: Count = None
    stop_reason: Text = None
    tokens: Count = None
    regimes: dict[str, RegimeResult] = Field(default_factory=dict)
    vs_eager: Number = None
    vs_compile: Number = None
    pct_of_floor: Number = None
    applied: list[AppliedStep] = Field(default_factory=list)
    environment: EnvironmentJson = Field(default_factory=dict)
    fraction_of_expert: Number = None
    expert_ms: dict[str, float] | None = None  # corpus rows whose expert was gated

    @field_validator("problem", "policy", mode="before")
    @classmethod
    def _name(cls, v: object) -> str:
        return "" if v is None else str(v)

    @field_validator("curve", mode="before")
    @classmethod
    def _points(cls, v: object) -> list[CurvePoint]:
        """The well-formed points, sorted: two numbers, a whole count of calls, a speedup > 0."""
        pts = []
        for p in v if isinstance(v, list | tuple) else []:
            if isinstance(p, list | tuple) and len(p) == 2:
                x, y = _count(p[0]), _finite(p[1])
                if x is not None and y is not None and y > 0:
                    pts.append((x, y))
        return sorted(pts)

    @field_validator("regimes", mode="before")
    @classmethod
    def _regimes(cls, v: object) -> dict[str, object]:
        return (
            {str(k): r for k, r in v.items() if isinstance(r, dict)} if isinstance(v, dict) else {}
        )

    @field_validator("applied", mode="before")
    @classmethod
    def _applied(cls, v: object) -> list[object]:
        """Kept trials; a bare string (hand-written files) is a step with only a label."""
        items = v if isinstance(v, list) else []
        return [a if isinstance(a, dict) else {"label": a} for a in items if a is not None]

    @field_validator("environment", mode="before")
    @classmethod
    def _env(cls, v: object) -> object:
        return v if isinstance(v, dict) else {}

    @field_validator("expert_ms", mode="before")
    @classmethod
    def _expert(cls, v: object) -> object:
        if not isinstance(v, dict):
            return None
        return {str(k): f for k, x in v.items() if (f := _finite(x)) is not None}

    @property
    def predicted(self) -> bool:
        """No kernel was timed for this row: its label is other than "measured"."""
        return self.label is not None and self.label != "measured"


class PolicySummary(_Record):
    """A policy's numbers over its rows (bench/run.py summarize); geomeans count a failed run as
    1.0x. `runs`, `anytime` and `anytime_mean` are absent from files written before them."""

    problems: Count = None
    runs: Count = None
    success_rate: Number = None
    geomean_speedup: Number = None
    geomean_vs_eager: Number = None
    geomean_vs_compile: Number = None
    geomean_fraction_of_expert: Number = None
    mean_calls_to_95: Number = None
    improved: Count = None  # problems whose geomean over seeds reached metrics.IMPROVED
    anytime: list[float] | None = None  # metrics.anytime over 1..N candidate calls
    anytime_mean: Number = None


class BenchFile(_Record):
    """OUT/bench.json (docs/REPORT.md, "Input")."""

    # `schema` is a BaseModel attribute, hence the alias; any value loads (the report warns
    # about a schema it does not read).
    schema_: int | str | None = Field(default=None, alias="schema")
    id: Text = None
    suite: Text = None
    device: Text = None
    budget: Count = None
    policies: list[str] = Field(default_factory=list)
    seeds: Count = None
    executor: Text = None
    environment: EnvironmentJson = Field(default_factory=dict)
    created: Text = None
    compile: Flag = None  # whether torch.compile was timed; absent before 2026-12-01
    rows: list[BenchRow] = Field(default_factory=list)
    summary: dict[str, PolicySummary] = Field(default_factory=dict)
    # Skill JSON, validated one by one by the report (report/cards.py), which names the skills
    # that do not match the schema instead of refusing the file.
    skills: list[Any] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    @field_validator("schema_", mode="before")
    @classmethod
    def _schema(cls, v: object) -> object:
        return v if isinstance(v, int | str) and not isinstance(v, bool) else None

    @field_validator("policies", "notes", mode="before")
    @classmethod
    def _names(cls, v: object) -> list[str]:
        return [str(p) for p in v] if isinstance(v, list) else []

    @field_validator("environment", mode="before")
    @classmethod
    def _env(cls, v: object) -> object:
        return v if isinstance(v, dict) else {}

    @field_validator("rows", mode="before")
    @classmethod
    def _rows(cls, v: object) -> list[object]:
        return [r for r in v if isinstance(r, dict | BenchRow)] if isinstance(v, list) else []

    @field_validator("summary", mode="before")
    @classmethod
    def _summary(cls, v: object) -> dict[str, object]:
        if not isinstance(v, dict):
            return {}
        return {str(k): s for k, s in v.items() if isinstance(s, dict | PolicySummary)}

    @field_validator("skills", mode="before")
    @classmethod
    def _skills(cls, v: object) -> list[object]:
        return v if isinstance(v, list) else []

    def to_json(self) -> dict[str, Any]:
        """The dict written to bench.json: only the keys the bench set, `schema` by its name."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)
