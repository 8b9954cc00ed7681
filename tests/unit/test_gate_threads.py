"""Threads for torch's CPU work in a gate call's processes (gate/threads.py): bounded on a GPU
host, where several calls run at once; left to torch on the CPU; KLINEAGE_GATE_THREADS wins."""

from __future__ import annotations

import os

import pytest
import torch

from klineage.errors import UsageError
from klineage.gate.session import _child_env
from klineage.gate.threads import gate_threads, torch_threads


def test_a_gpu_host_gives_each_process_a_quarter_of_the_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KLINEAGE_GATE_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert gate_threads("cuda") == 4
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert gate_threads("cuda") == 1
    assert gate_threads("cpu") is None  # the interpreter's work is the call itself
    env = _child_env("cuda", with_src=False)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert "OMP_NUM_THREADS" not in _child_env("cpu", with_src=True)


def test_the_variable_chooses_and_a_bad_value_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KLINEAGE_GATE_THREADS", "3")
    assert gate_threads("cpu") == gate_threads("cuda") == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("KLINEAGE_GATE_THREADS", bad)
        with pytest.raises(UsageError, match="KLINEAGE_GATE_THREADS"):
            gate_threads("cuda")


def test_the_parents_threads_are_restored_after_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    monkeypatch.setenv("KLINEAGE_GATE_THREADS", "1")
    with torch_threads("cuda"):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
