"""The profile stage's arithmetic (gate/profile.py, gate/devtime.py, klineage/metrics.py) on
made-up timings: no GPU, no kernels."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from klineage.config import GateConfig
from klineage.gate.devtime import MAX_SETS, input_sets, quantiles
from klineage.gate.profile import _Timed, describe, regime_row
from klineage.metrics import speedups, timed_geomean


def _timed(
    device: list[list[float]], host: list[list[float]] | None = None, capture: str | None = None
) -> _Timed:
    t = _Timed()
    for i, d in enumerate(device):
        h = host[i] if host else [x * 3 for x in d]
        t.add(
            SimpleNamespace(
                device=d,
                host=h,
                capture_error=capture,
                sets=4,
                picked={"k": "BLOCK=64"},
                forced={},
            )
        )
    return t


def _regime(nbytes: int = 64 << 20, **extra: Any) -> Any:
    base = {"name": "r", "nbytes": nbytes, "flops": None, "eager_ms": 0.1, "eager_host_ms": 0.2,
            "compile_ms": None, "compile_host_ms": None, "compile_error": None}  # fmt: skip
    return SimpleNamespace(**{**base, **extra})


def test_input_sets_cover_several_times_the_l2_within_their_caps() -> None:
    x = torch.zeros(1 << 20)  # 4 MiB
    sets = input_sets([x, 3], l2_bytes=60 << 20)
    assert len(sets) == MAX_SETS  # 3 x 60 MiB / 4 MiB = 45, capped at MAX_SETS (32)
    mid = torch.zeros(16 << 20, dtype=torch.uint8)  # 16 MiB: ceil(180 / 16) = 12, under the cap
    assert len(input_sets([mid], l2_bytes=60 << 20)) == 12
    assert all(s[1] == 3 for s in sets) and sets[0][0] is x and sets[1][0] is not x
    big = torch.zeros(64 << 20, dtype=torch.uint8)
    assert len(input_sets([big], l2_bytes=60 << 20)) == 3
    assert len(input_sets([7], l2_bytes=60 << 20)) == 1  # nothing to rotate


def test_quantiles_of_one_and_many_samples() -> None:
    assert quantiles([2.0]) == (2.0, 2.0, 2.0)
    p20, p50, p80 = quantiles([1.0, 2.0, 3.0, 4.0, 5.0])
    assert p20 < p50 == 3.0 < p80


def test_a_side_by_side_ratio_comes_from_the_rounds_with_its_range() -> None:
    mine = _timed([[0.010, 0.010], [0.011, 0.011], [0.010, 0.010]])
    base = _timed([[0.020, 0.020], [0.021, 0.021], [0.019, 0.019]])
    row = regime_row(_regime(), mine, base, None, GateConfig(), launch_ms=0.0005)
    assert row.basis == "device" and row.kernel_ms == pytest.approx(0.010)
    assert row.host_ms == pytest.approx(0.030)
    # Per round: 0.020/0.010, 0.021/0.011, 0.019/0.010; the median and the extremes.
    assert row.ratio == pytest.approx(0.021 / 0.011) and row.ratio_lo == pytest.approx(1.9)
    assert row.ratio_hi == pytest.approx(2.0) and row.within_noise is False
    assert not row.launch_bound and row.autotune == {"k": "BLOCK=64"}
    assert row.speedup_vs_eager == pytest.approx(10.0)  # device time against eager's device time
    assert "1.91x the base [1.9-2]" in describe(row)


def test_a_ratio_whose_rounds_straddle_one_is_within_noise() -> None:
    mine = _timed([[0.0100], [0.0104], [0.0098]])
    base = _timed([[0.0101], [0.0099], [0.0102]])
    row = regime_row(_regime(), mine, base, None, GateConfig(), launch_ms=0.0005)
    assert row.within_noise is True and "within noise" in describe(row)


def test_a_row_names_the_ceiling_its_floor_divides_by() -> None:
    mine = _timed([[0.10], [0.10]])
    h200 = regime_row(_regime(), mine, None, None, GateConfig(), None)
    assert h200.floor_kind == "bytes" and h200.floor_ceiling == GateConfig().copy_bytes_per_s
    own = regime_row(_regime(), mine, None, None, GateConfig(copy_bytes_per_s=3.0e12), None)
    assert own.floor_ceiling == 3.0e12
    # The same time against a slower card's ceiling is a larger share of that card's floor.
    assert own.pct_of_floor == pytest.approx(h200.pct_of_floor * h200.floor_ceiling / 3.0e12)
    flops = regime_row(_regime(flops=1e15), mine, None, None, GateConfig(), None)
    assert flops.floor_kind == "flops" and flops.floor_ceiling == GateConfig().matmul_flops_per_s


def test_launch_bound_by_floor_or_by_an_empty_launch() -> None:
    cfg = GateConfig()
    tiny = regime_row(
        _regime(nbytes=8 << 10), _timed([[0.010], [0.010]]), None, None, cfg, launch_ms=0.0005
    )
    assert tiny.launch_bound  # floor of 8 KiB is nanoseconds
    fast = regime_row(_regime(), _timed([[0.0015], [0.0015]]), None, None, cfg, launch_ms=0.0005)
    assert fast.launch_bound  # 1.5 us is 3 empty launches
    # A gain from a slow base to a launch-sized kernel is a real gain: the slower side decides.
    gain = regime_row(
        _regime(),
        _timed([[0.0015], [0.0015]]),
        _timed([[0.010], [0.010]]),
        None,
        cfg,
        launch_ms=0.0005,
    )
    assert not gain.launch_bound and gain.ratio == pytest.approx(0.010 / 0.0015)


def test_host_time_decides_when_asked_or_when_capture_failed() -> None:
    mine = _timed([[0.010], [0.010]])
    host = regime_row(_regime(), mine, None, None, GateConfig(time_basis="host"), None)
    assert (
        host.basis == "host"
        and host.kernel_ms == pytest.approx(0.030)
        and host.device_ms == pytest.approx(0.010)
    )
    failed = _timed([[], []], host=[[0.03], [0.03]], capture="RuntimeError: sync in capture")
    row = regime_row(_regime(), failed, None, None, GateConfig(), None)
    assert row.basis == "host" and row.device_ms is None and "no device time" in describe(row)
    # A base without device time makes the ratio a host ratio: like with like.
    both = regime_row(_regime(), mine, failed, None, GateConfig(), None)
    assert both.basis == "host" and both.ratio == pytest.approx(1.0)


def test_faster_than_physics_is_suspicious() -> None:
    row = regime_row(
        _regime(nbytes=1 << 30), _timed([[0.001], [0.001]]), None, None, GateConfig(), None
    )
    assert row.suspicious and "under the roofline floor" in row.suspicious[0]


def test_ten_times_the_references_is_suspicious_only_near_the_floor_and_both_beaten() -> None:
    cfg = GateConfig()
    # 1.6 us against eager's 16 us (several launches) and torch.compile's 1.4 us: the naive bf16
    # column max on the H200 (docs/benchmarks.md), not suspicious; nor, far from its floor, when
    # torch.compile is beaten 12x too or was not timed.
    for compile_ms in (0.00142, 0.02, None):
        tiny = dict(nbytes=4096, eager_ms=0.0163, compile_ms=compile_ms)
        row = regime_row(_regime(**tiny), _timed([[0.0016], [0.0016]]), None, None, cfg, None)
        assert row.speedup_vs_eager is not None and row.speedup_vs_eager > 10
        assert row.pct_of_floor < 1 and not row.suspicious, row.suspicious
    # The same times where 1.6 us is 80% of the floor's speed: 10x eager is no longer explained
    # by a slow reference, unless torch.compile was timed and is as near as the candidate.
    near = int(0.8 * 0.0016e-3 * cfg.copy_bytes_per_s)
    for compile_ms, flagged in ((0.02, True), (None, True), (0.0018, False)):
        made = dict(nbytes=near, eager_ms=0.0163, compile_ms=compile_ms)
        row = regime_row(_regime(**made), _timed([[0.0016], [0.0016]]), None, None, cfg, None)
        assert row.pct_of_floor == pytest.approx(80, rel=0.01)
        assert bool(row.suspicious) is flagged, row.suspicious
        if flagged:
            assert "faster than eager" in row.suspicious[0]
            assert ("torch.compile" in row.suspicious[0]) is (compile_ms is not None)
    # Eager's dim-0 softmax in fp16 (79 ms) beside a split online walk at 24% of the floor
    # (398 us, H100, docs/benchmarks.md): 199x eager, sound.
    soft = int(0.238 * 0.398e-3 * cfg.copy_bytes_per_s)
    row = regime_row(
        _regime(nbytes=soft, eager_ms=79.0), _timed([[0.398], [0.398]]), None, None, cfg, None
    )
    assert row.speedup_vs_eager is not None and row.speedup_vs_eager > 190 and not row.suspicious


def test_metrics_read_rows_and_leave_launch_bound_regimes_out_of_the_geomean() -> None:
    def gate(rows: dict[str, Any]) -> dict[str, Any]:
        return {"stages": [{"stage": "profile", "numbers": {"regimes": rows}}]}

    cfg = GateConfig()
    big = regime_row(
        _regime(), _timed([[0.01], [0.01]]), _timed([[0.02], [0.02]]), None, cfg, 0.0005
    )
    tiny = regime_row(
        _regime(nbytes=1024),
        _timed([[0.002], [0.002]]),
        _timed([[0.02], [0.02]]),
        None,
        cfg,
        0.0005,
    )
    new = gate({"big": big.model_dump(), "tiny": tiny.model_dump()})
    x = speedups(None, new)
    assert x["big"].side_by_side and x["big"].status == "measured"
    assert x["tiny"].status == "launch-bound" and not x["tiny"].evidence
    assert timed_geomean(x) == pytest.approx(2.0)
    # Rows of the old timing (no host time) are read, and marked as such.
    old = gate({"big": {"kernel_ms": 0.02}})
    assert speedups(old, gate({"big": {"kernel_ms": 0.01}}))["big"].status == "old timing"


def test_a_full_disk_is_the_machines_fault_not_the_problems(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    from collections import namedtuple

    from klineage.gate import disk as drive

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(100 << 30, 99 << 30, 1 << 29))
    err = drive.machine_fault(
        tmp_path,
        "RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598",
    )
    assert (
        err is not None and "is full (0.5 GiB free)" in str(err) and "fewer gate calls" in str(err)
    )
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(100 << 30, 10 << 30, 90 << 30))
    assert drive.machine_fault(tmp_path, "NameError: x") is None
    assert drive.machine_fault(tmp_path, "OSError: [Errno 28] No space left on device") is not None


class _TableHarness:
    """A harness whose autotune table's config k takes TIMES[k] ms (None: cannot run here)."""

    TIMES = (0.040, 0.010, None, 0.020)

    def __init__(self) -> None:
        self.asked: list[tuple[Any, bool]] = []

    def request(self, cmd: dict[str, Any], reply_type: Any) -> Any:
        k = cmd["force_config"]
        self.asked.append((k, cmd["keep"]))
        ms = self.TIMES[k] if k is not None else 0.015
        if ms is None:
            return reply_type(id=1, ok=False, error="OutOfResources: shared memory")
        forced = {} if k is None else {"kern": f"BLOCK={64 << k}"}
        return reply_type(id=1, ok=True, device=[ms] * cmd["samples"], host=[3 * ms] * cmd["samples"],
                          forced=forced)  # fmt: skip


def test_a_config_sweep_times_each_config_once_and_the_rounds_run_the_fastest() -> None:
    from klineage.gate.profile import Side, sweep, time_regime

    harness = _TableHarness()
    cand = Side(harness, __import__("pathlib").Path("/nonexistent"))
    regime = _regime(init="init.pt", cases=[SimpleNamespace(inputs="in.pt")])
    cfg = GateConfig(configs_per_call=3)  # the table has 4: only 3 are timed
    curve = sweep(regime, cand, 4, cfg)
    assert [c.index for c in curve] == [0, 1, 2]
    assert curve[1].ms == pytest.approx(0.010) and curve[1].config == "BLOCK=128"
    assert curve[2].ms is None and "OutOfResources" in (curve[2].error or "")
    assert all(keep is False for _, keep in harness.asked)  # sweep timers are dropped
    mine, _, _ = time_regime(regime, cand, None, cfg)
    assert harness.asked[3:] == [(1, True)] * cfg.timing_rounds  # the rounds run config 1
    row = regime_row(regime, mine, None, None, cfg, launch_ms=0.0005)
    row = row.model_copy(update={"configs": curve, "config_index": 1, "configs_in_table": 4})
    assert row.autotune == {"kern": "BLOCK=128"}
    assert "config 2 of 3 timed (4 in the table) fastest: BLOCK=128" in describe(row)
