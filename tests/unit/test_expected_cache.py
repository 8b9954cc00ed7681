"""The checker keeps a regime's reference outputs in memory (up to a byte cap), so a table of
autotune configs reads each case's expected output from disk once, not once per config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

import klineage.gate.checker as checker
from klineage.gate.expected import Expected
from klineage.gate.protocol import RefCase


def _case(folder: Path, name: str, value: float) -> RefCase:
    torch.save({"outputs": [torch.full((256,), value)]}, folder / f"{name}.pt")  # 1 KB
    return RefCase(label=name, kind="get_inputs", inputs=f"{name}-in.pt", expected=f"{name}.pt")


def test_cases_are_read_once_while_they_fit_and_the_oldest_goes_first(
    tmp_path: Path, monkeypatch: Any
) -> None:
    reads: list[str] = []
    real_load = torch.load

    def counting_load(path: Any, **kw: Any) -> Any:
        reads.append(Path(path).stem)
        return real_load(path, **kw)

    monkeypatch.setattr(torch, "load", counting_load)
    a, b, c = (_case(tmp_path, n, v) for n, v in (("a", 1.0), ("b", 2.0), ("c", 3.0)))
    exp = Expected(tmp_path, manifest=None, keep_bytes=2 * 1024)  # type: ignore[arg-type]
    for _config in range(3):  # three configs, each over the regime's two cases
        assert float(exp.outputs(a)[0][0]) == 1.0
        assert float(exp.outputs(b)[0][0]) == 2.0
    assert reads == ["a", "b"]
    exp.outputs(a)  # a is now the most recent: c's arrival drops b
    exp.outputs(c)
    exp.outputs(a)
    assert reads == ["a", "b", "c"]
    exp.outputs(b)
    assert reads == ["a", "b", "c", "b"]
    assert list(exp.cache) == ["a.pt", "b.pt"]


def test_later_configs_get_the_time_the_first_config_took_up_to_a_cap() -> None:
    """A regime's first config took t: the clock grows by (configs - 1) x t (configs capped at
    MAX_BUDGETED_CONFIGS), and by at most MEASURED_GRANT_FACTOR x the call's timeout in all."""
    from types import SimpleNamespace

    from klineage.gate.session import Clock

    clock = Clock(100.0)
    cfg = SimpleNamespace(timeout_s=100.0, timeout_per_config_s=10.0)
    c = checker.Checker(SimpleNamespace(config=cfg), SimpleNamespace(clock=clock), None, Path())  # type: ignore[arg-type]
    c._time_for_passes(4.0, 16)  # 15 more passes of 4 s
    assert clock.timeout_s == 160.0
    c._time_for_passes(10.0, 16)  # 150 s more: 210 of the 300 s a call may be granted
    assert clock.timeout_s == 310.0
    c._time_for_passes(50.0, 16)  # 750 s asked, the 90 s left given
    assert clock.timeout_s == 400.0
    c._time_for_passes(1.0, 16)
    assert clock.timeout_s == 400.0
