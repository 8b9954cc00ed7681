"""The profile sweep's rows chosen apart (gate/profile.py `sweep`, `apart`), on made-up timings:
a file that tunes two kernels, whose config c makes each take its row c, and a fake harness
whose time is the sum of each kernel's row time. No GPU, no kernels."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from klineage.config import GateConfig
from klineage.gate.harness_monitors import _forced_index, table_row
from klineage.gate.profile import APART_GAIN, Side, describe, sweep
from klineage.gate.records import ConfigTime, ProfileRow
from klineage.optimize.decide import folded

# The long-K matmul of 2026-12-07d trial 7, in microseconds: the product kernel's table folded
# to two rows (STEP 512, STEP 64), the sum kernel's sixteen; the diagonal pairs STEP 512 only
# with the sum's row 0.
PRODUCT = [29.0, 35.0]
SUM = [
    12.8,
    200.0,
    200.0,
    200.0,
    50.0,
    40.0,
    0.6,
    850.0,
    200.0,
    43.0,
    40.0,
    50.0,
    850.0,
    0.6,
    43.0,
    40.0,
]
KERNELS = {"dot_per_output": len(PRODUCT), "_split_k_sum": len(SUM)}


class FakeSide(Side):
    """Times the forward as the sum of each kernel's row under `force` (an index or rows)."""

    def __init__(self, tables: dict[str, list[float]]) -> None:
        super().__init__(None, None)
        self.tables, self.asked = tables, []

    def time(self, regime: Any, samples: int, *, force: Any = None, keep: bool = True) -> Any:
        force = self.force.get(regime.name) if force is None else force
        self.asked.append(force)
        rows = {k: _forced_index(force, k, len(t)) for k, t in self.tables.items()}
        ms = sum(self.tables[k][r] for k, r in rows.items()) / 1000.0
        forced = {k: f"row {r}" for k, r in rows.items()}
        return SimpleNamespace(ok=True, device=[ms] * 3, host=[ms * 2] * 3, forced=forced)


REGIME = SimpleNamespace(name="k1m_bf16")


def test_a_kernels_row_beside_anothers_is_found_apart_from_the_diagonal() -> None:
    side = FakeSide({"dot_per_output": PRODUCT, "_split_k_sum": SUM})
    curve = sweep(REGIME, side, len(SUM), GateConfig(), KERNELS)
    # the diagonal's best is (STEP 64, sum row 6): 35.6 us
    assert min((c for c in curve if c.rows is None), key=lambda c: c.ms or 0).index == 6
    assert side.force["k1m_bf16"] == {"dot_per_output": 0, "_split_k_sum": 6}
    best = min((c for c in curve if c.ms is not None), key=lambda c: c.ms or 0)
    assert best.rows == {"dot_per_output": 0, "_split_k_sum": 6}
    assert best.ms == pytest.approx((PRODUCT[0] + SUM[6]) / 1000.0)
    # one timing per other row of each tuned kernel, from the rows held so far
    assert len(curve) == len(SUM) + (len(PRODUCT) - 1) + (len(SUM) - 1)


def test_one_tuned_kernel_is_swept_on_the_diagonal_only() -> None:
    side = FakeSide({"dot_per_output": PRODUCT, "_split_k_sum": [12.8]})
    curve = sweep(REGIME, side, 2, GateConfig(), {"dot_per_output": 2, "_split_k_sum": 1})
    assert [c.rows for c in curve] == [None, None]
    assert side.force["k1m_bf16"] == 0


def test_rows_apart_within_the_gain_leave_the_index() -> None:
    within = [10.0, 10.0 * (1 - APART_GAIN / 2)]  # a row just under the noise the sweep allows
    side = FakeSide({"a": within, "b": [5.0, 9.0]})
    sweep(REGIME, side, 2, GateConfig(), {"a": 2, "b": 2})
    assert side.force["k1m_bf16"] == 0  # (a 0, b 0) stays: a's row 1 is not 2% faster


def test_forced_rows_name_each_kernels_row_clamped_to_its_table() -> None:
    assert _forced_index({"a": 5, "b": 1}, "a", 3) == table_row(5, 3) == 2
    assert _forced_index({"a": 5, "b": 1}, "b", 3) == 1
    assert _forced_index({"a": 5}, "c", 4) == 0  # a kernel the rows do not name: its first


TWO_TABLES = """
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"STEP": 512}, num_warps=4, num_stages=2),
        triton.Config({"STEP": 64}, num_warps=4, num_stages=3),
    ],
    key=["K"],
)
@triton.jit
def dot_per_output(a, K, STEP: tl.constexpr):
    pass


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=4),
        triton.Config({"BLOCK": 4096}, num_warps=4),
        triton.Config({"BLOCK": 16}, num_warps=4),
    ],
    key=["n"],
)
@triton.jit
def _split_k_sum(p, n, BLOCK: tl.constexpr):
    pass
"""


def _gate(rows: dict[str, ProfileRow]) -> dict[str, Any]:
    numbers = {"regimes": {k: r.model_dump(exclude_none=True) for k, r in rows.items()}}
    return {"stages": [{"stage": "profile", "status": "passed", "numbers": numbers}]}


def _row(index: int, rows: dict[str, int] | None = None) -> ProfileRow:
    return ProfileRow(
        kernel_ms=0.03,
        kernel_p20_ms=0.03,
        kernel_p80_ms=0.03,
        basis="device",
        host_ms=0.05,
        host_p20_ms=0.05,
        host_p80_ms=0.05,
        configs=[ConfigTime(index=index, rows=rows, ms=0.03)],
        config_index=index,
        config_rows=rows,
    )


def test_a_kept_file_folds_to_each_kernels_row_chosen_apart() -> None:
    gate = _gate({"bf16": _row(2, {"dot_per_output": 0, "_split_k_sum": 2}), "fp32": _row(1)})
    source, _ = folded(TWO_TABLES, gate)
    assert source.count("triton.Config(") == 4
    # bf16 ran STEP 512 beside BLOCK 16 (rows 0 and 2), fp32 the index 1 (STEP 64, BLOCK 4096)
    first, second = source.split("def dot_per_output")
    assert first.index('"STEP": 512') < first.index('"STEP": 64')
    assert second.index('"BLOCK": 16') < second.index('"BLOCK": 4096')
    assert '"BLOCK": 256' not in second


def test_describe_names_the_rows_chosen_apart() -> None:
    row = _row(6, {"dot_per_output": 0, "_split_k_sum": 6})
    row = row.model_copy(
        update={"configs": [ConfigTime(index=6, ms=0.035), *row.configs], "configs_in_table": 16}
    )
    text = describe(row)
    assert "config 7 of 1 timed (16 in the table)" in text
    assert "chosen apart: {'dot_per_output': 0, '_split_k_sum': 6}" in text
