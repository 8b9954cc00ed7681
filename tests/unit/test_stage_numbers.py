"""StageResult.numbers is typed (gate/records.py StageNumbers): a wrong value is a validation
error where it is made or read, stored results of every shape still read, and the JSON keeps
the shape it had as a plain dict."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from klineage.gate.records import (
    GateResult,
    ProfileRow,
    Stage,
    StageNumbers,
    StageResult,
    Status,
    profile_rows,
)


def _row(ms: float, **extra: Any) -> dict[str, Any]:
    return {"kernel_ms": ms, "kernel_p20_ms": ms, "kernel_p80_ms": ms, "basis": "device",
            "host_ms": ms, "host_p20_ms": ms, "host_p80_ms": ms, **extra}  # fmt: skip


def _written(ms: float, **extra: Any) -> dict[str, Any]:
    """A row as gate/profile.py wrote it into the plain dict: every field but the None ones."""
    return ProfileRow.model_validate(_row(ms, **extra)).model_dump(mode="json", exclude_none=True)


def _stored(numbers: dict[str, Any]) -> dict[str, Any]:
    return {"stages": [{"stage": "profile", "status": "passed", "numbers": numbers}]}


def test_a_wrong_value_is_a_validation_error_not_a_dict_entry() -> None:
    with pytest.raises(ValidationError, match="kernel_ms"):
        StageResult(stage=Stage.PROFILE, status=Status.PASSED,
                    numbers={"regimes": {"r": _row(1.0, kernel_ms="fast")}})  # fmt: skip
    with pytest.raises(ValidationError, match="launches"):
        StageNumbers.model_validate({"launches": "many"})
    with pytest.raises(ValidationError, match="max_abs_err"):  # no stage writes it
        StageNumbers.model_validate({"max_abs_err": 0.1})
    with pytest.raises(ValidationError, match="kernel_ms"):
        profile_rows(_stored({"regimes": {"r": {"host_ms": 1.0}}}))


def test_stored_rows_of_the_old_timing_still_read() -> None:
    # Protocol < 4: a do_bench median and its quantiles, no host time.
    old = profile_rows(_stored({"regimes": {"r": {"kernel_ms": 0.02, "kernel_p80_ms": 0.03}}}))
    assert old["r"].basis == "old" and old["r"].host_ms == 0.02
    assert old["r"].kernel_p20_ms == 0.02 and old["r"].host_p80_ms == 0.03
    new = profile_rows(_stored({"regimes": {"r": _row(0.01)}, "launch_ms": None, "basis": "host"}))
    assert new["r"].basis == "device" and new["r"].host_ms == 0.01
    assert profile_rows(_stored({})) == {} and profile_rows({"stages": []}) == {}


@pytest.mark.parametrize(
    "numbers",
    [
        {},
        {"regimes": ["tiny", "large"]},  # the load stage: regime names
        {"launches": 2, "autotune_configs": 4},  # compile
        {"regimes": {"r": _written(0.5, ratio=1.5)}},  # a rejected profile stage
        {"regimes": {"r": _written(0.5)}, "launch_ms": None, "basis": "device"},  # launch_ms: null
    ],
)
def test_the_json_keeps_the_shape_of_the_plain_dict(numbers: dict[str, Any]) -> None:
    stage = {"stage": "load", "status": "passed", "message": "", "numbers": numbers,
             "regimes": [], "seconds": 0.0}  # fmt: skip
    gate = GateResult(problem="p.py", candidate="c.py", device="cpu", accepted=True,
                      stages=[StageResult.model_validate(stage)])  # fmt: skip
    assert gate.model_dump(mode="json")["stages"][0] == stage


def test_the_load_stage_names_and_the_profile_rows_are_two_fields() -> None:
    load = StageNumbers.model_validate({"regimes": ["tiny"]})
    assert load.regime_names == ["tiny"] and load.regimes == {}
    with pytest.raises(ValidationError, match="either"):
        StageNumbers(regime_names=["r"], regimes={"r": _row(1.0)})  # type: ignore[dict-item]
