"""Parent-side pieces that need no child: result assembly after a crash, cache, config."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from klineage.config import MAX_TOLERANCE, GateConfig
from klineage.gate.cache import GateCache, cache_key
from klineage.gate.records import Stage, Status
from klineage.gate.request import GateRequest, passed
from klineage.gate.runner import _assemble


def req() -> GateRequest:
    return GateRequest(problem="p.py", candidate="c.py")


def test_crash_is_charged_to_the_stage_that_was_running() -> None:
    events = [
        {"type": "start", "stage": "load"},
        {
            "type": "stage",
            "result": passed(Stage.LOAD, "ok", regimes=["a"]).model_dump(mode="json"),
        },
        {"type": "start", "stage": "compile"},
    ]
    r = _assemble(
        req(),
        [passed(Stage.STATIC_GUARDS, "ok")],
        events,
        "candidate process killed by SIGSEGV",
        1.0,
    )
    assert not r.accepted
    assert r.failed_stage is Stage.COMPILE
    assert r.regimes == ["a"]
    assert [s.status for s in r.stages][-3:] == [Status.SKIPPED] * 3
    assert r.stages[-1].message == "not reached: an earlier stage failed"


def test_accepted_needs_compile_guards_and_correctness_passed() -> None:
    events = [
        {"type": "stage", "result": passed(s, "ok").model_dump(mode="json")}
        for s in (Stage.LOAD, Stage.COMPILE, Stage.RUNTIME_GUARDS)
    ]
    r = _assemble(req(), [passed(Stage.STATIC_GUARDS, "ok")], events, None, 1.0)
    assert not r.accepted  # correctness never reported
    events.append(
        {"type": "stage", "result": passed(Stage.CORRECTNESS, "ok").model_dump(mode="json")}
    )
    assert _assemble(req(), [passed(Stage.STATIC_GUARDS, "ok")], events, None, 1.0).accepted


def test_cache_round_trip_and_torn_entries_are_ignored(tmp_path: Path) -> None:
    r = _assemble(req(), [passed(Stage.STATIC_GUARDS, "ok")], [], None, 0.5)
    cache = GateCache(tmp_path)
    key = cache_key({"a": 1})
    assert cache.get(key) is None
    cache.put(key, r)
    assert cache.get(key) == r
    (tmp_path / "gate" / key[:2] / f"{key}.json").write_text('{"torn": ')
    assert cache.get(key) is None


def test_cache_key_depends_on_every_part() -> None:
    assert cache_key({"a": 1, "b": 2}) == cache_key({"b": 2, "a": 1})
    assert cache_key({"a": 1}) != cache_key({"a": 2})


def test_tolerance_can_never_exceed_the_ceiling() -> None:
    with pytest.raises(ValidationError, match="must be in"):
        GateConfig(tolerances={"float16": MAX_TOLERANCE * 2})
    with pytest.raises(ValidationError):
        GateConfig(trials=3)
    assert GateConfig().tolerance_for("float16") == 1e-2


def test_configs_the_autotuner_would_skip_are_recognised() -> None:
    from triton.runtime.errors import OutOfResources

    from klineage.gate.worker import is_autotuner_skip

    assert is_autotuner_skip(OutOfResources(294912, 232448, "shared memory"))
    assert not is_autotuner_skip(
        RuntimeError("CUDA error: an illegal memory access was encountered")
    )
