"""The roofline floor (no GPU needed): bytes or flops, measured ceilings or datasheet peaks."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from klineage.config import GateConfig
from klineage.gate.profile import floor_ms
from klineage.gate.request import GateRequest


def req() -> GateRequest:
    return GateRequest(
        problem="p",
        candidate="c",
        config=GateConfig(
            copy_bytes_per_s=1e12,
            matmul_flops_per_s=1e14,
            peak_bytes_per_s=2e12,
            peak_flops_per_s=2e14,
        ),
    )


def test_bytes_floor_counts_inputs_read_once_and_outputs_written_once() -> None:
    x = torch.empty(1000, 250)  # 1e6 bytes
    problem = SimpleNamespace(module=SimpleNamespace())
    ms, kind = floor_ms(problem, [x], x, req())
    assert kind == "bytes" and abs(ms - 2e6 / 1e12 * 1e3) < 1e-12
    assert abs(floor_ms(problem, [x], x, req(), peak=True)[0] - ms / 2) < 1e-12


def test_flop_count_decides_when_it_is_the_larger_term() -> None:
    a = torch.empty(64, 64, dtype=torch.bfloat16)
    problem = SimpleNamespace(module=SimpleNamespace(flop_count=lambda x: 1e12))
    ms, kind = floor_ms(problem, [a], a, req())
    assert kind == "flops" and abs(ms - 1e12 / 1e14 * 1e3) < 1e-9


def test_spin_up_keeps_the_device_busy_for_the_time_asked() -> None:
    import time

    from klineage.gate.profile import spin_up_gpu

    t0 = time.perf_counter()
    runs = spin_up_gpu(60.0, device="cpu")  # the same loop, on CPU tensors
    assert (time.perf_counter() - t0) * 1e3 >= 60.0 and runs >= 4
    assert spin_up_gpu(0.0, device="cpu") == 0
