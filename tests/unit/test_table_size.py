"""How many configs a tunables proposal carries: the gate checks each on every case, so the
count follows what the start's correctness stage cost."""

from __future__ import annotations

from klineage.optimize.policies import table_size


def _gate(correctness_s: float | None) -> dict:
    stages = [{"stage": "load", "seconds": 40.0}, {"stage": "compile", "seconds": 6.0}]
    if correctness_s is not None:
        stages.append({"stage": "correctness", "seconds": correctness_s})
    return {"stages": stages}


def test_cheap_regimes_get_the_whole_share() -> None:
    assert table_size(16, 120.0, _gate(3.0)) == 16


def test_costly_regimes_get_what_fits_in_twice_the_timeout() -> None:
    # the reverse cumsum's start on the H200: 35 calls over 84M-element regimes, 36 s
    assert table_size(16, 120.0, _gate(36.3)) == 6
    assert table_size(16, 120.0, _gate(200.0)) == 2  # never fewer than two: still a search


def test_no_measured_correctness_keeps_the_configured_count() -> None:
    assert table_size(16, 120.0, _gate(None)) == 16
    assert table_size(8, 120.0, {}) == 8
