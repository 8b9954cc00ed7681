"""The harness's timing command (gate/harness.py, op "time"): a config the autotuner would skip
(Triton's OutOfResources, say: a table entry needing more shared memory than the GPU has) is
answered as a config that cannot be timed, so the gate's sweep records it and times the others;
any other error still ends the candidate's process, as before (no kernels run here: the GPU
side is replaced)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from klineage.gate.protocol import TimeReply

GATE = Path(__file__).resolve().parents[2] / "src" / "klineage" / "gate"


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_kl_harness_script", GATE / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class OutOfResources(Exception):  # named as Triton's: the harness matches by class name
    pass


def _raising(error: BaseException) -> Any:
    def time_round(self: Any, cmd: dict[str, Any]) -> dict[str, Any]:
        raise error

    return time_round


def test_a_config_out_of_shared_memory_is_a_skipped_config(monkeypatch: pytest.MonkeyPatch) -> None:
    h = _harness()
    monkeypatch.setattr(
        h.GPU, "time_round", _raising(OutOfResources("shared memory, Required: 327680"))
    )
    reply = h.Harness.dispatch(object(), {"op": "time", "id": 7, "force_config": 3})
    parsed = TimeReply.model_validate(reply)
    assert parsed.id == 7 and not parsed.ok and reply["skip"]
    assert parsed.error is not None and "327680" in parsed.error


def test_any_other_timing_error_still_ends_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    h = _harness()
    monkeypatch.setattr(h.GPU, "time_round", _raising(RuntimeError("CUDA error: misaligned")))
    with pytest.raises(RuntimeError, match="misaligned"):
        h.Harness.dispatch(object(), {"op": "time", "id": 1})
