"""The harness keeps the case inputs it read (gate/harness.py, Harness.read_inputs): a file is
read once while it is kept, whatever the number of autotune configs that run it, and only
copies reach the candidate, so nothing it does to its inputs reaches a later call."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from tests.unit.test_harness_time_skip import _harness


def _setup(tmp_path: Path, monkeypatch: Any, keep: int = 1 << 30) -> tuple[Any, list[str]]:
    module = _harness()
    monkeypatch.setattr(module, "KEEP_INPUT_BYTES", keep)
    r, w = os.pipe()
    os.close(r)
    h = module.Harness(w)
    loads: list[str] = []
    real = torch.load

    def counting(path: Any, *a: Any, **k: Any) -> Any:
        loads.append(str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(torch, "load", counting)
    return h, loads


def _case(tmp_path: Path, name: str, value: float, n: int = 64) -> str:
    path = tmp_path / f"{name}.pt"
    torch.save({"inputs": [torch.full((n,), value), 3]}, path)
    return str(path)


def test_a_case_is_read_once_and_only_copies_are_handed_out(tmp_path: Path, monkeypatch) -> None:
    h, loads = _setup(tmp_path, monkeypatch)
    a = _case(tmp_path, "a", 1.0)
    first = h.inputs({"inputs": a})
    first[0].add_(100.0)  # the candidate writes into its inputs
    second = h.inputs({"inputs": a})
    assert loads == [a]
    assert torch.equal(second[0], torch.full((64,), 1.0)) and second[1] == 3
    assert second[0].data_ptr() != first[0].data_ptr()


def test_a_buffer_case_never_writes_into_the_kept_inputs(tmp_path: Path, monkeypatch) -> None:
    """Buffer cases copy new contents into the tensors the last call on that buffer got: those
    are copies, so the first case's kept inputs are still its own when a later config runs it."""
    h, loads = _setup(tmp_path, monkeypatch)
    a, b = _case(tmp_path, "a", 1.0), _case(tmp_path, "b", 2.0)
    h.inputs({"inputs": a, "buffer": "x"})
    h.inputs({"inputs": b, "buffer": "x"})
    again = h.inputs({"inputs": a})
    assert torch.equal(again[0], torch.full((64,), 1.0))
    assert loads == [a, b]


def test_least_recently_used_files_are_dropped_past_the_cap(tmp_path: Path, monkeypatch) -> None:
    h, loads = _setup(tmp_path, monkeypatch, keep=2 * 64 * 4)  # two cases of 64 fp32
    a, b, c = (_case(tmp_path, n, v) for n, v in (("a", 1.0), ("b", 2.0), ("c", 3.0)))
    for path in (a, b, a, c):  # c drops b (a was used after it)
        h.inputs({"inputs": path})
    h.inputs({"inputs": a})
    h.inputs({"inputs": b})
    assert loads == [a, b, c, b]


def test_a_rewritten_file_is_read_again(tmp_path: Path, monkeypatch) -> None:
    h, loads = _setup(tmp_path, monkeypatch)
    a = _case(tmp_path, "a", 1.0)
    h.inputs({"inputs": a})
    torch.save({"inputs": [torch.full((65,), 5.0), 3]}, a)  # another size: another key
    assert torch.equal(h.inputs({"inputs": a})[0], torch.full((65,), 5.0))
    assert loads == [a, a]
