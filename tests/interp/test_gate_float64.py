"""Correctness that knows floating point, on real kernels in the interpreter: a column sum over
16384 rows and a row cumsum over 16384 columns, on cancelling data, in other summation orders
than PyTorch's. Both are beyond the 1e-4 tolerance of PyTorch's own float32 output (shown here,
outside the gate, with the plain tolerance) and accepted by the gate against the reference
evaluated in float64; the same kernels dropping one term are rejected by a wide margin, and the
message names the worst element."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from klineage.config import GateConfig
from klineage.gate import GateResult, Stage, run_gate
from klineage.gate.compare import FLOAT64, TORCH_ERROR
from tests.conftest import CANDIDATES, PROBLEMS

pytestmark = pytest.mark.interpreter

# problem, regime, correct candidate, the criterion that accepts it on the trials (on a case
# beyond get_inputs, either float64 criterion may decide), the candidate dropping a term
CASES = [
    # BLOCK_R interleaved accumulators: closer to float64 than PyTorch's own float32 sum
    ("column_sum", "tall", "column_sum_blocked", FLOAT64, "column_sum_drops_row"),
    # a float32 carry over 16 blocks: a few times PyTorch's error (which rounds once on the CPU)
    ("row_cumsum", "long", "row_cumsum_blocked", TORCH_ERROR, "row_cumsum_drops_term"),
]
IDS = [c[0] for c in CASES]
PARAMS = ("problem", "regime", "candidate", "criterion", "dropping")

# Run apart, under TRITON_INTERPRET=1 from its start: a triton.language imported without it (by
# an earlier test in this process) cannot run kernels in the interpreter.
OUTSIDE_THE_GATE = """
import json, sys
from pathlib import Path
import torch
from klineage.gate.compare import compare_tensor
from klineage.gate.reference import trial_seed
from klineage.problem.loader import import_file, load_problem
problem, candidate, regime, trials = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
prob = load_problem(problem)
new = import_file(candidate, "_float64_candidate").ModelNew()
model = prob.model_cls()
rows = []
for t in range(trials):
    torch.manual_seed(trial_seed(0, regime, t))
    (x,) = prob.make_inputs(regime, "cpu")
    want, got = model(x), new(x)
    exact = model.double()(x.double())
    model.float()
    old = compare_tensor(got, want, 1e-4, "output")
    both = compare_tensor(got, want, 1e-4, "output", exact=exact)
    rows.append({"old": old.ok, "old_message": old.message, "ok": both.ok,
                 "criterion": both.criterion, "message": both.message})
print(json.dumps(rows))
"""


def gate(problem: str, candidate: str) -> GateResult:
    return run_gate(PROBLEMS / f"{problem}.py", CANDIDATES / f"{candidate}.py",
                    config=GateConfig(cache=False))  # fmt: skip


@pytest.mark.parametrize(PARAMS, CASES, ids=IDS)
def test_the_plain_tolerance_rejects_the_other_order_and_float64_accepts_it(
    problem: str, regime: str, candidate: str, criterion: str, dropping: str
) -> None:
    """Outside the gate, on the gate's own trial inputs: the old criterion (tolerance against
    PyTorch's float32 output) fails on some trial, the float64 criteria pass on every one."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [str(PROBLEMS / f"{problem}.py"), str(CANDIDATES / f"{candidate}.py"), regime,
            str(GateConfig().trials)]  # fmt: skip
    done = subprocess.run([sys.executable, "-c", OUTSIDE_THE_GATE, *args], env=env,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(r["ok"] for r in rows), [r["message"] for r in rows]
    rejected = [r for r in rows if not r["old"]]
    assert rejected, "the plain tolerance accepted every trial: the data do not cancel enough"
    assert "beyond tolerance 0.0001" in rejected[0]["old_message"]
    assert criterion in {r["criterion"] for r in rejected}


@pytest.mark.parametrize(PARAMS, CASES, ids=IDS)
def test_the_gate_accepts_another_summation_order_and_says_by_which_criterion(
    problem: str, regime: str, candidate: str, criterion: str, dropping: str
) -> None:
    r = gate(problem, candidate)
    assert r.accepted, r.message
    correctness = r.stage(Stage.CORRECTNESS)
    assert correctness is not None
    (outcome,) = correctness.regimes
    assert outcome.regime == regime, outcome.message
    assert outcome.criterion in (FLOAT64, TORCH_ERROR), outcome.message
    assert "beyond tolerance of the reference's own output passed against its float64" in (
        outcome.message
    )
    if outcome.criterion == TORCH_ERROR:
        assert "within 16x of PyTorch's own float32 error against float64" in outcome.message
    else:
        assert "within tolerance 0.0001 of the float64 evaluation" in outcome.message


@pytest.mark.parametrize(PARAMS, CASES, ids=IDS)
def test_the_same_kernel_dropping_one_term_fails_by_a_wide_margin(
    problem: str, regime: str, candidate: str, criterion: str, dropping: str
) -> None:
    r = gate(problem, dropping)
    assert not r.accepted and r.failed_stage is Stage.CORRECTNESS, r.message
    msg = r.message
    assert "also against the reference evaluated in float64" in msg and "worst at (" in msg, msg
    err, allowed = (float(v) for v in re.findall(r"abs err (\S+), allowed ([^)]+)\)", msg)[0])
    assert err > 50 * allowed, msg
    if problem == "row_cumsum":
        assert ", 16383): got" in msg  # the last prefix sum of a row, the one missing a term


def test_a_reference_that_upcasts_itself_is_still_evaluated_in_float64() -> None:
    """`torch.cumsum(x.float(), -1).to(x.dtype)`: the float64 evaluation keeps float64 through
    the Model's own cast (gate/upcast.py), so the blocked scan is measured against float64 and
    PyTorch's own error is not 0 (it read 0 when the cast took the evaluation to float32, and a
    correct reverse cumsum was rejected on the H200); the kernel dropping a term still fails."""
    r = gate("row_cumsum_upcasting", "row_cumsum_blocked")
    assert r.accepted, r.message
    correctness = r.stage(Stage.CORRECTNESS)
    assert correctness is not None
    (outcome,) = correctness.regimes
    assert outcome.criterion == TORCH_ERROR, outcome.message
    own = float(re.findall(r"within 16x of PyTorch's own float32 error against float64 \(max \S+ vs (\S+)\)", outcome.message)[0])  # fmt: skip
    assert own > 1e-4, outcome.message
    dropped = gate("row_cumsum_upcasting", "row_cumsum_drops_term")
    assert not dropped.accepted and dropped.failed_stage is Stage.CORRECTNESS, dropped.message
