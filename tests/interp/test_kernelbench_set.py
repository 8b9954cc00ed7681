"""An unchanged-in-form KernelBench level-2 problem, whose bias_shape is computed from
out_features, gated, distilled and optimized on the CPU with --set at a small size: the
override rebinds the assignment before the module runs, so bias_shape follows and the reference
runs; the verdicts and the stored runs record the sizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.lineage.walk import lineage_id
from tests.conftest import CANDIDATES, PROBLEMS

pytestmark = pytest.mark.interpreter

PROBLEM = PROBLEMS / "kb_linear_bias_relu.py"
CANDIDATE = CANDIDATES / "kb_linear_bias_relu_triton.py"
SIZES = {"batch_size": 5, "in_features": 20, "out_features": 9}
SET = [a for k, v in SIZES.items() for a in ("--set", f"{k}={v}")]


def klineage(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "klineage", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def test_gate_with_set_accepts_and_records_the_sizes() -> None:
    r = run_gate(PROBLEM, CANDIDATE, device="cpu", overrides=SIZES, config=GateConfig())
    assert r.accepted, r.message
    assert r.overrides == SIZES
    # The CLI, same problem, candidate and sizes (the verdict cache may answer).
    out = klineage("gate", PROBLEM, CANDIDATE, *SET, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)
    assert data["accepted"] is True and data["overrides"] == SIZES


def test_set_of_a_name_the_problem_does_not_assign_is_a_usage_error() -> None:
    out = klineage("gate", PROBLEM, CANDIDATE, "--set", "out_channels=8")
    assert out.returncode == 2
    text = " ".join(out.stderr.split())
    assert str(PROBLEM) in text and "--set out_channels: no module-level assignment" in text
    assert "assignable globals: batch_size, in_features, out_features, bias_shape" in text


def test_distill_with_set_walks_at_that_size(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    out = klineage("distill", PROBLEM, CANDIDATE, *SET, "--passes", "cache_eviction_hints",
                   "--policy", "first", "--max-steps", "1", "--json", "--db", db)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "done"
    assert [s["rewrite"] for s in data["steps"] if s["accepted"]] == ["cache_eviction_hints"]
    from klineage.store import open_store

    nodes = open_store(db).nodes(data["id"])
    assert all(n.gate["overrides"] == SIZES for n in nodes)


def test_optimize_with_set_runs_at_that_size_and_records_it(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    out = klineage("optimize", PROBLEM, CANDIDATE, *SET, "--budget", "1", "--json", "--db", db)
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads(out.stdout)
    from klineage.store import open_store

    run = open_store(db).get_run(summary["run_id"])
    assert run is not None and run.settings["overrides"] == SIZES
    assert run.start_gate is not None and run.start_gate["overrides"] == SIZES


def test_overrides_are_part_of_the_lineage_id() -> None:
    args = ("p", "e", "cpu", "first", [], ["num_warps"])
    assert lineage_id(*args) == lineage_id(*args, {})
    assert lineage_id(*args, {"n": 8}) != lineage_id(*args) != lineage_id(*args, {"n": 9})


def test_a_set_that_contradicts_a_derived_global_is_named_in_the_problems_error() -> None:
    bad = {**SIZES, "bias_shape": (SIZES["out_features"] + 1,)}
    r = run_gate(PROBLEM, CANDIDATE, device="cpu", overrides=bad, config=GateConfig())
    assert not r.accepted and r.fault is not None and r.fault.value == "problem", r.message
    assert "the problem ran with --set" in r.message and "bias_shape=[10]" in r.message
